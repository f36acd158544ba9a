#!/usr/bin/env python3
"""`nmt serve` over real HTTP on 127.0.0.1 (an ephemeral port): answers equal
`nmt translate`'s, concurrent requests batched, attention maps, every kind of
bad request, a full queue, metrics, and SIGTERM under load.

Usage: serve_api_test.py NMT CHECKPOINT LINES_FILE WORK_DIR
Prints one line per check; exits 1 if any failed.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

nmt, checkpoint, lines_file, work = sys.argv[1:5]
lines = [l.rstrip("\n") for l in open(lines_file, encoding="utf-8")]
failures = 0
passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what, flush=True)


class Server:
    # poll: how often to look for the port file (a test that signals the
    # server the moment it appears looks often).
    def __init__(self, name, *flags, poll=0.05):
        self.port_file = os.path.join(work, name + ".port")
        self.log = open(os.path.join(work, name + ".log"), "w")
        self.proc = subprocess.Popen([nmt, "serve", "--checkpoint", checkpoint, "--port", "0",
                                      "--port-file", self.port_file, "--threads", "2", *flags],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"FAIL: {name} did not start: " + open(self.log.name).read()[-500:])
            time.sleep(poll)
        self.port = int(open(self.port_file).read())

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if headers is None else headers)
        r = c.getresponse()
        payload = r.read()
        c.close()
        return r.status, dict(r.getheaders()), payload

    def translate(self, text, **extra):
        status, headers, payload = self.request("POST", "/v1/translate", {"text": text, **extra})
        return status, headers, json.loads(payload)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.log.close()
        return rc


def cli_translate(extra):
    out = subprocess.run([nmt, "translate", "--checkpoint", checkpoint, "--input", lines_file, "--threads", "2",
                          *extra], capture_output=True, text=True, check=True)
    return out.stdout.split("\n")[:len(lines)]


expected_greedy = cli_translate([])
expected_beam = cli_translate(["--beam", "4"])

server = Server("main", "--max-body-bytes", "65536", "--max-sentences", "16")

# The listening socket's backlog (ss's Send-Q for a listener): Debian's
# cpp-httplib listens with 5, and 128 clients connecting at once then lost
# about 1% of their requests after the 1-second SYN retry.
ss = subprocess.run(["ss", "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True)
backlog = int(ss.stdout.split()[2]) if ss.returncode == 0 and ss.stdout.split() else -1
check(backlog >= 128, f"listen backlog {backlog} (ss: {ss.stdout.strip() or ss.stderr.strip()}), want >= 128")

# The HTTP threads run as SCHED_BATCH (no preempting a worker mid-step when a
# request arrives); the workers and the main thread keep the default policy.
policies = {}
for tid in os.listdir(f"/proc/{server.proc.pid}/task"):
    try:
        name = open(f"/proc/{server.proc.pid}/task/{tid}/comm").read().strip()
        stat = open(f"/proc/{server.proc.pid}/task/{tid}/stat").read()
    except OSError:
        continue
    policy = int(stat.rsplit(")", 1)[1].split()[38])  # field 41 of proc(5): policy (0 other, 3 batch)
    policies.setdefault(name, set()).add(policy)
http_policies = policies.get("MHD-worker", set())
other_policies = set().union(*(v for k, v in policies.items() if k != "MHD-worker"))
check(http_policies == {3} and other_policies == {0},
      f"scheduling policies: HTTP threads {sorted(http_policies)} (want [3], SCHED_BATCH), others {sorted(other_policies)} (want [0])")
# The decoding workers carry their own name (bench/bench_serve.sh counts
# their CPU time apart from the HTTP threads' by it).
check(policies.get("nmt-batch") == {0}, f"threads by name: {sorted(policies)}, want decoding workers named nmt-batch")

# 1. The same answers as nmt translate: one request of 16 lines, then every
#    line as its own request from 24 threads at once (dynamic batches),
#    greedy and beam 4 in turn (both join the running batch).
status, _, answer = server.translate(lines[:16])
check(status == 200 and answer["translations"] == expected_greedy[:16], "one request of 16 lines = nmt translate")
status, _, answer = server.translate(lines[:8], beam=4)
check(status == 200 and answer["translations"] == expected_beam[:8], "beam 4 = nmt translate --beam 4")

results = {}


def one(i):
    s, _, a = server.translate([lines[i]], **({"beam": 4} if i % 2 else {}))
    results[i] = (s, a.get("translations", [None])[0])


def expected(i):
    return expected_beam[i] if i % 2 else expected_greedy[i]


threads = [threading.Thread(target=one, args=(i,)) for i in range(len(lines))]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(all(results[i] == (200, expected(i)) for i in range(len(lines))),
      f"{len(lines)} concurrent single-line requests, greedy and beam 4 = nmt translate "
      f"({sum(results[i] == (200, expected(i)) for i in range(len(lines)))} equal)")
status, _, metrics = server.request("GET", "/metrics")
metrics = metrics.decode()


def metric(name):
    line = next((l for l in metrics.splitlines() if l.startswith(name + " ")), None)
    return float(line.split()[1]) if line else 0.0


# A "batch" of greedy requests is one decoding step of a running batch
# (continuous batching): merged means steps ran several sentences at once.
steps, rows = metric("nmt_batch_sentences_count"), metric("nmt_batch_sentences_sum")
print(f"  {metric('nmt_sentences_total'):.0f} sentences so far, {rows / max(steps, 1):.2f} per decoding step")
check(status == 200 and steps > 0 and rows > 1.5 * steps, "concurrent requests were merged into batches")
check('nmt_http_requests_total{path="/v1/translate",code="200"}' in metrics and "nmt_queue_sentences 0" in metrics
      and "# TYPE nmt_translate_latency_seconds histogram" in metrics, "/metrics in Prometheus text format")

# The benchmark's load generator (bench/src/serve_load.cpp, built beside nmt)
# against this server: every answer equal to nmt translate's; with wrong
# expectations every answer a failure; against a closed port every request a
# connection failure, and no hang.
serve_load = os.path.join(os.path.dirname(os.path.abspath(nmt)), "serve_load")
check(os.access(serve_load, os.X_OK), f"{serve_load} is built")
if os.access(serve_load, os.X_OK):
    expect_file, wrong_file = os.path.join(work, "expect.en"), os.path.join(work, "wrong.en")
    with open(expect_file, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in expected_greedy))
    with open(wrong_file, "w", encoding="utf-8") as f:
        f.write("".join("x" + t + "\n" for t in expected_greedy))

    def load(port, expect, requests):
        out = subprocess.run([serve_load, "--port", str(port), "--lines", lines_file, "--concurrency", "8",
                              "--requests", str(requests), "--expect", expect],
                             capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr}

    r = load(server.port, expect_file, 120)
    check(r.get("statuses") == {"200": 120} and r.get("failures") == 0 and r.get("sentences_per_s", 0) > 0
          and r.get("p50_ms") is not None, f"serve_load: 120 answers equal to nmt translate: {r}")
    r = load(server.port, wrong_file, 40)
    check(r.get("statuses") == {"200": 40} and r.get("failures") == 40, f"serve_load: wrong expectations fail: {r}")
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    r = load(closed_port, expect_file, 20)
    check(r.get("statuses") == {"connect": 20} and r.get("failures") == 20,
          f"serve_load: a closed port gives connection failures: {r}")

# 2. Attention maps.
status, _, answer = server.translate([lines[0], ""], attention=True)
att = answer.get("attention", [{}])[0] if status == 200 else {}
S, T = len(att.get("source", [])), len(att.get("target_in", []))
info = json.loads(server.request("GET", "/v1/info")[2])
L, H = info["decoder_layers"], info["heads"]


def shape(x):
    return [len(x)] + shape(x[0]) if isinstance(x, list) and x else ([0] if isinstance(x, list) else [])


check(status == 200 and S > 0 and T == len(att["target_out"]) and att["target_in"][0] == "<start>"
      and att["target_out"][-1] == "<end>", "attention: tokens of both sides")
check(shape(att.get("encoder_self")) == [info["encoder_layers"], H, S, S]
      and shape(att.get("decoder_self")) == [L, H, T, T] and shape(att.get("cross")) == [L, H, T, S],
      f"attention: shapes {shape(att.get('encoder_self'))} {shape(att.get('decoder_self'))} {shape(att.get('cross'))}")
upper = [att["decoder_self"][l][h][i][j] for l in range(L) for h in range(H) for i in range(T) for j in range(i + 1, T)]
check(upper and max(upper) == 0, "attention: the decoder's upper triangle is zero")
sums = [sum(row) for kind in ("encoder_self", "decoder_self", "cross") for layer in att[kind] for head in layer
        for row in head]
check(all(abs(s - 1) < 2e-3 for s in sums), "attention: every row sums to 1")
check(answer["translations"] == [expected_greedy[0], ""] and answer["attention"][1]["source"] == [],
      "attention: translations unchanged, an empty line gives empty maps")
status, _, _ = server.request("GET", "/")
check(status == 200, "GET / serves the explorer")

# 2b. A text longer than the model reads is cut to its first max_positions
#     tokens and translated, as nmt translate does, and the answer names it.
long_text = " ".join(lines) * 3
with open(os.path.join(work, "long.zh"), "w", encoding="utf-8") as f:
    f.write(long_text + "\n")
cli_long = subprocess.run([nmt, "translate", "--checkpoint", checkpoint, "--input", os.path.join(work, "long.zh"),
                           "--threads", "2"], capture_output=True, text=True, check=True)
status, _, answer = server.translate([lines[0], long_text])
check(status == 200 and answer.get("cut") == [1] and answer["translations"][0] == expected_greedy[0] and
      answer["translations"][1] == cli_long.stdout.split("\n")[0] and "source longer" in cli_long.stderr,
      f"an over-long text: {status}, cut {answer.get('cut')!r}, the same translation as nmt translate "
      f"({answer.get('translations', [None, None])[1] == cli_long.stdout.split(chr(10))[0]})")
status, _, answer = server.translate([lines[0]])
check(status == 200 and "cut" not in answer, "no cut field when nothing was cut")

# 3. Bad requests: a JSON error with a message and the right code, never a crash.
bad = [
    ("malformed JSON", "POST", "/v1/translate", b'{"text": ["a"', 400),
    ("empty body", "POST", "/v1/translate", b"", 400),
    ("not an object", "POST", "/v1/translate", b'["a"]', 400),
    ("text a number", "POST", "/v1/translate", b'{"text": 5}', 400),
    ("text[1] a number", "POST", "/v1/translate", b'{"text": ["a", 5]}', 400),
    ("beam out of range", "POST", "/v1/translate", b'{"text": ["a"], "beam": 99}', 400),
    ("unknown field", "POST", "/v1/translate", b'{"text": ["a"], "beem": 2}', 400),
    ("invalid UTF-8", "POST", "/v1/translate", b'{"text": ["\xe4\xbd"]}', 400),
    ("NUL in a line", "POST", "/v1/translate", b'{"text": ["a\\u0000b"]}', 400),
    ("too many sentences", "POST", "/v1/translate", json.dumps({"text": ["a"] * 17}).encode(), 413),
    ("body over the limit", "POST", "/v1/translate", json.dumps({"text": ["a" * 70000]}).encode(), 413),
    ("unknown path", "GET", "/nope", None, 404),
    ("unknown path, POST", "POST", "/v2/translate", b"{}", 404),
    ("wrong method", "GET", "/v1/translate", None, 405),
    ("wrong method", "DELETE", "/metrics", None, 405),
]
for what, method, path, body, code in bad:
    status, headers, payload = server.request(method, path, body)
    try:
        message = json.loads(payload)["error"]["message"]
    except Exception:
        message = None
    check(status == code and message, f"{what}: {status} {message!r} (want {code} with a message)")
    if code == 405:
        check("Allow" in headers, f"{what}: 405 names the allowed methods ({headers.get('Allow')})")
check(server.request("GET", "/healthz")[0] == 200 and server.proc.poll() is None, "still healthy after bad requests")

# 3a. A body over the limit from a client that sends all of it before it
#     reads the answer (http.client, as requests): 12 MB, more than the
#     sockets buffer, so a connection closed in the middle of the send would
#     be a broken pipe. The service reads and drops it, then answers 413 and
#     closes. Past the bound it drops (16 MiB here) it closes at once.
big = json.dumps({"text": ["a" * 12_000_000]}).encode()
try:
    status, headers, payload = server.request("POST", "/v1/translate", big)
    check(status == 413 and "larger than the limit" in payload.decode(errors="replace")
          and headers.get("Connection") == "close", f"a 12 MB body: {status} {headers.get('Connection')} {payload[:100]!r}")
except OSError as e:
    check(False, f"a 12 MB body: {type(e).__name__} ({e}) instead of a 413")
check(server.request("GET", "/healthz")[0] == 200, "healthy after a body over the limit")


# 3b. Who may call (serve/access.h): a Host that names the service, no other
#     web page's Origin, JSON bodies only; and the security headers.
def error_of(payload):
    try:
        return json.loads(payload)["error"]["message"]
    except Exception:
        return ""


one_line = json.dumps({"text": [lines[0]]}).encode()
J = {"Content-Type": "application/json"}
here = f"127.0.0.1:{server.port}"
access = [
    ("Host an attacker's name (DNS rebinding)", {**J, "Host": f"evil.example:{server.port}"}, 403, "Host"),
    ("Host and Origin both the attacker's", {**J, "Host": f"evil.example:{server.port}",
                                             "Origin": f"http://evil.example:{server.port}"}, 403, "Host"),
    ("Host malformed", {**J, "Host": "127.0.0.1:80x"}, 400, "Host"),
    ("a cross-origin POST", {**J, "Origin": "https://attacker.example"}, 403, "Origin"),
    ("Origin null (a sandboxed page)", {**J, "Origin": "null"}, 403, "Origin"),
    ("a text/plain POST (no CORS preflight)", {"Content-Type": "text/plain"}, 415, "Content-Type"),
    ("a form POST", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type"),
    ("no Content-Type", {}, 415, "Content-Type"),
    ("Host localhost", {**J, "Host": f"localhost:{server.port}"}, 200, None),
    ("Host [::1]", {**J, "Host": f"[::1]:{server.port}"}, 200, None),
    ("the service's own page", {**J, "Origin": f"http://{here}"}, 200, None),
    ("JSON with a charset", {"Content-Type": "application/json; charset=utf-8"}, 200, None),
]
for what, headers, code, names in access:
    status, _, payload = server.request("POST", "/v1/translate", one_line, headers)
    message = error_of(payload)
    check(status == code and (names is None or names in message),
          f"{what}: {status} {message!r} (want {code}{' naming ' + names if names else ''})")
status, headers, _ = server.request("GET", "/", None, {})
check(status == 200 and headers.get("X-Content-Type-Options") == "nosniff" and
      "default-src 'self'" in headers.get("Content-Security-Policy", "") and
      headers.get("Referrer-Policy") == "no-referrer", f"security headers on the explorer: {headers}")
status, headers, _ = server.request("GET", "/v1/info", None, {"Origin": "https://attacker.example"})
check(status == 403, f"a cross-origin GET of /v1/info: {status} (want 403)")
# A second server on a port in use fails (exit 2) instead of sharing it.
second = subprocess.run([nmt, "serve", "--checkpoint", checkpoint, "--port", str(server.port), "--threads", "1"],
                        capture_output=True, text=True, timeout=60)
check(second.returncode == 2 and "cannot listen" in second.stderr,
      f"a port in use: exit {second.returncode}, {second.stderr.strip()[-120:]!r}")
rc = server.stop()
check(rc == 0, f"SIGTERM when idle: exit {rc}")
# The port file says the service is up: a SIGTERM sent the moment it appears
# stops it cleanly (the handlers were once installed after it was written,
# and such a signal killed the server: exit -15).
early = [Server(f"early{i}", poll=0.0005).stop() for i in range(8)]
check(early == [0] * 8, f"SIGTERM as the port file appears: exits {early} (want all 0)")

# 3c. API keys (--api-key-file): the API needs "Authorization: Bearer KEY";
#     /healthz and the explorer's files stay open; a bad key file is refused.
key = "k3y-" + "0123456789abcdef" * 2
key_file = os.path.join(work, "keys.txt")
with open(key_file, "w") as f:
    f.write("# the service's keys\n\n" + key + "\n")
keyed = Server("keyed", "--api-key-file", key_file)
status, headers, payload = keyed.request("POST", "/v1/translate", one_line)
check(status == 401 and headers.get("WWW-Authenticate") == "Bearer" and "Bearer" in error_of(payload),
      f"keyed, no key: {status} {headers.get('WWW-Authenticate')!r} (want 401, WWW-Authenticate: Bearer)")
status, _, _ = keyed.request("POST", "/v1/translate", one_line, {**J, "Authorization": "Bearer " + key[:-1] + "x"})
check(status == 401, f"keyed, a wrong key: {status} (want 401)")
status, _, payload = keyed.request("POST", "/v1/translate", one_line, {**J, "Authorization": "Bearer " + key})
check(status == 200 and json.loads(payload)["translations"] == expected_greedy[:1], f"keyed, the key: {status}")
check(keyed.request("GET", "/metrics", None, {})[0] == 401, "keyed: /metrics needs the key")
check(keyed.request("GET", "/healthz", None, {})[0] == 200 and keyed.request("GET", "/", None, {})[0] == 200,
      "keyed: /healthz and the explorer page stay open")
rc = keyed.stop()
check(rc == 0, f"keyed: SIGTERM: exit {rc}")
with open(os.path.join(work, "short_keys.txt"), "w") as f:
    f.write("short\n")
for what, flags, needle in [
        ("a key file with a short key", ["--api-key-file", os.path.join(work, "short_keys.txt")], "short_keys.txt:1"),
        ("a missing key file", ["--api-key-file", os.path.join(work, "no_such_keys.txt")], "no_such_keys.txt"),
        ("--allow-host with a port", ["--allow-host", "example.org:80"], "--allow-host"),
        ("--allow-origin without a scheme", ["--allow-origin", "example.org"], "--allow-origin")]:
    bad_start = subprocess.run([nmt, "serve", "--checkpoint", checkpoint, "--port", "0", *flags],
                               capture_output=True, text=True, timeout=60)
    check(bad_start.returncode == 2 and needle in bad_start.stderr,
          f"{what}: exit {bad_start.returncode}, {bad_start.stderr.strip()[-150:]!r} (want 2 naming {needle})")

# 3d. Translations that stop at the length limit before ending: named in the
#     answer ("length_limited": their indices) and counted in /metrics
#     (nmt_length_limited_total), greedy and beam alike, the same lines as
#     `nmt translate` names.
five = lines[:5]
cli = subprocess.run([nmt, "translate", "--checkpoint", checkpoint, "--input", lines_file, "--max-len", "2",
                      "--threads", "2"], capture_output=True, text=True, check=True)
named = cli.stderr.split("translate: ")[-1]
limited_cli = [int(n) - 1 for n in re.findall(r"line (\d+)", named) if int(n) <= len(five)]
short = Server("limited", "--max-len", "2")
status, _, greedy = short.translate(five)
status_beam, _, beam = short.translate(five, beam=4)
_, _, metrics_text = short.request("GET", "/metrics", None, {})
total = [float(l.split()[-1]) for l in metrics_text.decode().splitlines() if l.startswith("nmt_length_limited_total ")]
check(status == 200 and greedy.get("length_limited") == limited_cli and limited_cli,
      f"--max-len 2, greedy: length_limited {greedy.get('length_limited')} (nmt translate names {limited_cli})")
check(status_beam == 200 and beam.get("length_limited") and
      total == [len(greedy.get("length_limited", [])) + len(beam.get("length_limited", []))],
      f"--max-len 2: /metrics nmt_length_limited_total {total}, answers {greedy.get('length_limited')} and "
      f"{beam.get('length_limited')}")
short.stop()

# 3e. A translation that lost a placeholder of its text (this model does not
#     protect placeholders): named in the answer ("placeholders_lost": the
#     texts' indices) and warned about once in the service's log, naming it.
plain = Server("placeholders")
status, _, answer = plain.translate([lines[0], "文件 %s 不存在"])
rc = plain.stop()
log = open(plain.log.name, encoding="utf-8").read()
check(status == 200 and answer.get("placeholders_lost") == [1] and rc == 0 and
      log.count("lost placeholders") == 1 and "(1 of 2 texts: %s)" in log and "does not protect" in log,
      f"a lost placeholder: answer {answer}, log: {[l for l in log.splitlines() if 'placeholder' in l]}")

# 4. A full queue answers 503 with Retry-After instead of growing. Whole
# batches (--batching static) wait --max-delay-ms for company, so requests
# stay queued (with continuous batching they start at once).
slow = Server("queue", "--max-queue", "4", "--max-delay-ms", "1500", "--max-batch-tokens", "100000",
              "--batching", "static")
codes = []
retry = []
# The start-up log names the delay only where batches wait for it (static);
# continuous batching starts a request at once.
main_log = open(os.path.join(work, "main.log"), encoding="utf-8").read()
slow_log = open(os.path.join(work, "queue.log"), encoding="utf-8").read()
check("ms delay" not in main_log and "starts at once" in main_log and "waits up to 1500 ms" in slow_log,
      f"the batching line: continuous {[l for l in main_log.splitlines() if 'batching:' in l]}, static "
      f"{[l for l in slow_log.splitlines() if 'batching:' in l]}")


def queued(i):
    s, h, _ = slow.request("POST", "/v1/translate", {"text": [lines[i % len(lines)]], "beam": 2})
    codes.append(s)
    if s == 503:
        retry.append(h.get("Retry-After"))


threads = [threading.Thread(target=queued, args=(i,)) for i in range(12)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(codes.count(200) >= 4 and codes.count(503) >= 1 and set(codes) <= {200, 503},
      f"full queue: {codes.count(200)} answered, {codes.count(503)} refused with 503")
check(retry and all(r == "1" for r in retry), "503 carries Retry-After")
check(slow.stop() == 0, "queue server stops cleanly")

# 5. SIGTERM under load: every request that got an answer got all of it, and
#    every one the server read before the signal was translated.
server = Server("load")
stop_clients = threading.Event()
outcomes = []  # (status or error, translations ok)


def client(k):
    i = k
    while not stop_clients.is_set():
        batch = [lines[(i + j) % len(lines)] for j in range(3)]
        want = [expected_greedy[(i + j) % len(lines)] for j in range(3)]
        i += 7
        try:
            c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            c.request("POST", "/v1/translate", body=json.dumps({"text": batch}),
                      headers={"Content-Type": "application/json"})
        except OSError as e:  # refused: the server no longer accepts
            outcomes.append(("connect: " + type(e).__name__, True))
            time.sleep(0.05)
            continue
        try:
            r = c.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError) as e:
            outcomes.append(("closed before answering", True))  # nothing was done for it
            continue
        try:
            payload = r.read()  # IncompleteRead: an answer cut short (a failure)
            body = json.loads(payload)
            outcomes.append((r.status, r.status != 200 or body["translations"] == want))
        except Exception as e:
            outcomes.append(("cut short: " + type(e).__name__, False))
        c.close()


clients = [threading.Thread(target=client, args=(k,)) for k in range(16)]
for t in clients:
    t.start()
# Under load: the signal comes once a few batches have been answered in full
# (an event, with a deadline), while the 16 clients keep the queue full.
deadline = time.time() + 60
while sum(o[0] == 200 for o in outcomes) < 12 and time.time() < deadline:
    time.sleep(0.01)
server.proc.send_signal(signal.SIGTERM)
t0 = time.time()
try:
    rc = server.proc.wait(timeout=60)
except subprocess.TimeoutExpired:
    rc = "hung"
    server.proc.kill()
stopped_in = time.time() - t0
stop_clients.set()
for t in clients:
    t.join()
server.log.close()
answered = [o for o in outcomes if o[0] == 200]
cut = [o for o in outcomes if isinstance(o[0], str) and o[0].startswith("cut short")]
wrong = [o for o in outcomes if o[0] == 200 and not o[1]]
# 503: read after the signal ("shutting down"); any other status is a request
# the server read and did not finish.
unfinished = [o for o in outcomes if isinstance(o[0], int) and o[0] not in (200, 503)]
kinds = sorted({str(o[0]) for o in outcomes})
print(f"  under load: {len(answered)} answered in full, outcomes {kinds}, stopped {stopped_in:.1f} s after SIGTERM")
check(rc == 0, f"SIGTERM under load: exit {rc}")
check(len(answered) > 10 and not cut and not wrong and not unfinished,
      f"SIGTERM under load: {len(cut)} answers cut short, {len(wrong)} wrong translations, "
      f"{len(unfinished)} answered with an error")
log = open(os.path.join(work, "load.log")).read()
check("stopping" in log and "stopped" in log, "the log says it drained and stopped")

print(f"serve_api_test: {passes} passed, {failures} failed")
sys.exit(1 if failures else 0)
