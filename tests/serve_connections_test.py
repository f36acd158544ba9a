#!/usr/bin/env python3
"""`nmt serve` under clients that hold connections (an ephemeral port on
127.0.0.1): idle connections and connections that trickle their headers a
byte a second must not delay a normal request, are closed at their
deadlines, and a client address beyond its connection limit gets 503 with
Retry-After.

Usage: serve_connections_test.py NMT CHECKPOINT WORK_DIR [IDLE SLOW]
(IDLE idle connections and SLOW slow-header ones, 1500 and 300 by default;
a server that spends a thread per connection, 256 of them, makes a normal
request wait for an idle connection's timeout.) Exits 1 if any check failed.
"""
import json
import os
import re
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import http.client

nmt, checkpoint, work = sys.argv[1:4]
idle_count = int(sys.argv[4]) if len(sys.argv) > 4 else 1500
slow_count = int(sys.argv[5]) if len(sys.argv) > 5 else 300
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
failures = 0


def check(ok, what):
    global failures
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    failures += 0 if ok else 1


def start(name, *flags):
    port_file = os.path.join(work, name + ".port")
    if os.path.exists(port_file):
        os.remove(port_file)
    log = open(os.path.join(work, name + ".log"), "w")
    proc = subprocess.Popen([nmt, "serve", "--checkpoint", checkpoint, "--port", "0", "--port-file", port_file,
                             "--threads", "1", *flags], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit(f"FAIL: {name} did not start: " + open(log.name).read()[-500:])
        time.sleep(0.05)
    return proc, int(open(port_file).read())


def translate(port, text, timeout=30):
    t = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", "/v1/translate", body=json.dumps({"text": [text]}), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, dict(r.getheaders()), body, time.time() - t


def read_response(s):
    """One whole HTTP response (head and Content-Length body) from a blocking socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    m = re.search(rb"(?i)content-length: *(\d+)", head)
    length = int(m.group(1)) if m else 0
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def served_again(port, deadline_s=10.0):
    """The status of a translation once the server has let go of closed
    connections: asked again until 200 or the deadline (an event, not a pause)."""
    deadline = time.time() + deadline_s
    status = translate(port, "打开文件")[0]
    while status != 200 and time.time() < deadline:
        time.sleep(0.05)
        status = translate(port, "打开文件")[0]
    return status


def connect(port, source):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    return s


def closed_by_peer(s):
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def wait_closed(sockets, deadline):
    """Waits until the server has closed each socket or the deadline passed: {socket: when it closed}."""
    sel = selectors.DefaultSelector()
    for s in sockets:
        sel.register(s, selectors.EVENT_READ)
    closed = {}
    while len(closed) < len(sockets) and time.time() < deadline:
        for key, _ in sel.select(timeout=max(0.0, deadline - time.time())):
            if closed_by_peer(key.fileobj):
                closed[key.fileobj] = time.time()
                sel.unregister(key.fileobj)
    sel.close()
    return closed


# 1. Idle and slow-header connections while normal requests are answered.
proc, port = start("hold", "--header-timeout", "6", "--idle-timeout", "4", "--max-connections-per-client", "100000")
status, _, body, _ = translate(port, "打开文件")
check(status == 200, f"unloaded request: {status}")
unloaded = statistics.median(translate(port, "打开文件")[3] for _ in range(5))
# The holders come from other loopback addresses, as other clients would.
opening = time.time()
held = [connect(port, f"127.0.{1 + i // 250}.{1 + i % 250}") for i in range(idle_count)]
slow = [connect(port, f"127.1.{1 + i // 250}.{1 + i % 250}") for i in range(slow_count)]
opened = time.time()
time.sleep(0.5)
request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 64
stop = threading.Event()


def trickle():
    i = 0
    while not stop.is_set() and i < len(request):
        for s in slow:
            try:
                s.send(request[i:i + 1])
            except OSError:
                pass
        i += 1
        stop.wait(1.0)


trickler = threading.Thread(target=trickle)
trickler.start()
times = []
statuses = []
while time.time() - opened < 3.0:
    status, _, _, took = translate(port, "打开文件", timeout=20)
    statuses.append(status)
    times.append(took)
worst = max(times)
check(all(s == 200 for s in statuses) and worst < unloaded + 1.0,
      f"{len(times)} requests beside {idle_count} idle and {slow_count} slow-header connections: all 200, "
      f"slowest {worst * 1000:.0f} ms (unloaded median {unloaded * 1000:.0f} ms)")
# The server closes them at their deadlines: idle ones after --idle-timeout
# (4 s), slow ones after --header-timeout (6 s) although they keep sending.
# Waited for as events (each socket's end of stream), with a deadline.
closed_at = wait_closed(held + slow, opened + 20.0)
# (No connection was opened before `opening`, all were by `opened`.)
idle_times = [closed_at[s] - opening for s in held if s in closed_at]
slow_times = [closed_at[s] - opening for s in slow if s in closed_at]
late = opened - opening
check(len(idle_times) == idle_count and min(idle_times) > 3.5 and max(idle_times) < late + 6.0,
      f"idle connections closed after the 4 s idle timeout: {len(idle_times)} of {idle_count}, "
      f"between {min(idle_times, default=0):.1f} and {max(idle_times, default=0):.1f} s")
check(len(slow_times) == slow_count and min(slow_times) > 5.5 and max(slow_times) < late + 9.0,
      f"slow-header connections closed after the 6 s header timeout: {len(slow_times)} of {slow_count}, "
      f"between {min(slow_times, default=0):.1f} and {max(slow_times, default=0):.1f} s")
stop.set()
trickler.join()
for s in held + slow:
    s.close()
check(translate(port, "打开文件")[0] == 200, "still answering afterwards")
proc.send_signal(signal.SIGTERM)
check(proc.wait(timeout=60) == 0, "SIGTERM: exit 0")

# 2. One address beyond its connection limit: 503 with Retry-After; its
#    other connections and other addresses are served.
proc, port = start("limit", "--max-connections-per-client", "5")
mine = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
# Each of the five answered (so the server holds all five) before the sixth.
for s in mine:
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    s.settimeout(10)
    check(read_response(s).startswith(b"HTTP/1.1 200"), "a connection within the limit is answered")
status, headers, body, _ = translate(port, "打开文件")
check(status == 503 and headers.get("Retry-After") == "1" and b"too many connections" in body,
      f"a 6th connection from one address: {status} {headers.get('Retry-After')!r} {body[:100]!r}")
other = socket.socket()
other.bind(("127.0.0.2", 0))
other.connect(("127.0.0.1", port))
other.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
check(other.recv(100).startswith(b"HTTP/1.1 200"), "another address is served")
mine[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
check(mine[0].recv(100).startswith(b"HTTP/1.1 200"), "a connection within the limit is served")
for s in mine + [other]:
    s.close()
check(served_again(port) == 200, "served again once the address's connections closed")
proc.send_signal(signal.SIGTERM)
check(proc.wait(timeout=60) == 0, "SIGTERM: exit 0")
# 2b. Bodies being read at once are bounded (256 of --max-body-bytes): the
#     257th request announcing a 1 MiB body, while 256 others are still
#     uploading theirs, gets 503 before its body is read.
proc, port = start("budget", "--max-body-bytes", "1048576")
head = (b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1048576\r\n\r\n")
uploading = []
for i in range(256):
    u = socket.socket()
    u.bind((f"127.0.9.{1 + i // 128}", 0))
    u.connect(("127.0.0.1", port))
    u.sendall(head + b"{")
    uploading.append(u)
time.sleep(0.5)
last = socket.socket()
last.bind(("127.0.9.9", 0))
last.connect(("127.0.0.1", port))
last.settimeout(5)
last.sendall(head)
answer = last.recv(4096)
check(answer.startswith(b"HTTP/1.1 503") and b"too many request bodies" in answer and b"Retry-After: 1" in answer,
      f"a body beyond the service's budget: {answer[:60]!r}")
for u in uploading[1:] + [last]:
    u.close()
check(served_again(port) == 200, "served again once the uploads ended")
# SIGTERM while a body is still arriving: that request is not waited for.
uploading[0].sendall(b'"text"')  # still uploading: its idle timeout starts again
t = time.time()
proc.send_signal(signal.SIGTERM)
rc = proc.wait(timeout=60)
check(rc == 0 and time.time() - t < 3, f"SIGTERM during an upload: exit {rc} after {time.time() - t:.1f} s")
uploading[0].close()

# 3. HTTP/1.1 details, on raw sockets.
proc, port = start("http", "--max-body-bytes", "4096")


def exchange(data, wait=10.0, then=None):
    """Sends data (then `then` once something came back): everything received until the server closes, and
    the seconds until the first byte came back."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(wait)
    t = time.time()
    s.sendall(data)
    out = b""
    first = None
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            first = first or time.time() - t
            out += b
            if then is not None:
                s.sendall(then)
                then = None
    except socket.timeout:
        out += b"<timeout>"
    s.close()
    return out, first if first is not None else time.time() - t


H = b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
body = json.dumps({"text": ["打开文件"]}).encode()
out, took = exchange(b"POST /v1/translate HTTP/1.1\r\n" + H + b"\r\n")
check(out.startswith(b"HTTP/1.1 411") and took < 2, f"a POST without a body: {out[:12]!r} after {took:.2f} s")
out, took = exchange(b"POST /v1/translate HTTP/1.1\r\n" + H + b"Content-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
check(out.startswith(b"HTTP/1.1 413") and b"100 Continue" not in out and took < 2,
      f"a Content-Length over the limit: {out[:12]!r}, no 100 Continue, after {took:.2f} s")
chunk = b"x" * 3000
out, _ = exchange(b"POST /v1/translate HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n" +
                  (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 2 + b"0\r\n\r\n")
check(out.startswith(b"HTTP/1.1 413"), f"chunks passing the limit: {out[:12]!r}")
out, _ = exchange(b"POST /v1/translate HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                  b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
check(out.startswith(b"HTTP/1.1 200") and b"translations" in out, f"a chunked body: {out[:12]!r}")
out, _ = exchange(b"POST /v1/translate HTTP/1.1\r\n" + H + b"Expect: 100-continue\r\nConnection: close\r\n" +
                  b"Content-Length: %d\r\n\r\n" % len(body), then=body)
check(out.startswith(b"HTTP/1.1 100 Continue") and b"HTTP/1.1 200" in out, f"Expect: 100-continue: {out[:40]!r}")
out, _ = exchange(b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
check(out.startswith(b"HTTP/1.1 200") and out.endswith(b"\r\n\r\n"), f"HEAD: headers only ({len(out)} bytes)")
out, _ = exchange(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" +
                  b"POST /v1/translate HTTP/1.1\r\n" + H + b"Content-Length: %d\r\n\r\n" % len(body) + body +
                  b"GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
check(out.count(b"HTTP/1.1 200") == 3, f"three pipelined requests on one connection: {out.count(b'HTTP/1.1 200')} answers")
# Large answers gzip'ed for a client that takes gzip (a browser also offers br).
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
big = json.dumps({"text": ["打开文件"] * 8, "attention": True})
c.request("POST", "/v1/translate", body=big, headers={"Content-Type": "application/json",
                                                       "Accept-Encoding": "gzip, deflate, br"})
r = c.getresponse()
packed = r.read()
import gzip
plain = json.loads(gzip.decompress(packed)) if r.getheader("Content-Encoding") == "gzip" else None
check(r.status == 200 and plain is not None and len(plain["attention"]) == 8 and
      [v.strip() for v in (r.getheader("Vary") or "").split(",")] == ["Origin", "Accept-Encoding"],
      f"a large answer gzip'ed: {r.getheader('Content-Encoding')}, {len(packed)} bytes")
c.request("POST", "/v1/translate", body=big, headers={"Content-Type": "application/json"})
r = c.getresponse()
check(r.getheader("Content-Encoding") is None and len(r.read()) > len(packed), "not gzip'ed for a client without gzip")
c.close()
proc.send_signal(signal.SIGTERM)
check(proc.wait(timeout=60) == 0, "SIGTERM: exit 0")
print(f"serve connections: {'all passed' if failures == 0 else f'{failures} failed'}")
sys.exit(1 if failures else 0)
