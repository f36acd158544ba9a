#!/usr/bin/env bash
# `nmt serve` under load on loopback, against `nmt translate` on the same
# sentences in the same run.
#
# Usage: bench/bench_serve.sh --checkpoint DIR [--lines FILE] [--longest] [--sentences N]
#          [--requests R] [--threads N] [--soak-minutes M] [--compute-type T]
#          [--hold IDLE,SLOW] [--rounds K] [--beam K] [--out DIR]
#   --beam K: offline and every request decode with beam K (0: greedy;
#   default: the checkpoint's decode.beam on both sides)
#   --longest: the N longest lines (in characters; ties in file order) of
#   data/real/test.zh and valid.zh instead of FILE's first N (the "long
#   sentences" row: 33.5 characters on average, against 15.2 for the first
#   500 test lines)
#   defaults: data/real/test.zh, 500 sentences, 2000 requests per level,
#   2 threads, no soak, the checkpoint's decode.compute_type, --hold
#   10000,1000, 9 rounds, docs/bench
#
# 1. Offline: nmt translate --batch-size 32 over as many sentences as a load
#    level sends (R, round the N), three runs, the median (sentences/s from
#    its log, model loading left out); its output is what every answer of
#    the service must equal.
# 2. The service (defaults: --max-batch-tokens 1024 --max-delay-ms 10) under
#    serve_load (bench/src/serve_load.cpp, built beside nmt; a C++ client on
#    one epoll thread, so that the load generator takes little of the cores
#    the server runs on):
#    closed-loop clients, one sentence per request, at
#    concurrency 1, 8, 32 and 128; R requests each, going round the N
#    sentences (a level's first and last requests run at lower concurrency:
#    enough requests make that a small part of the run). Per level: sentences/s,
#    latency p50/p95/p99, the server's own translation time of the request's
#    batch (Server-Timing; at concurrency 1 a batch is that one request, so
#    it is the time of a single translate call), statuses, failures and the
#    CPU seconds the load generator itself used.
#    Before them, concurrency 32 with --batching static (whole batches,
#    no joining between decoding steps), for comparison in the same run.
# 2b. The concurrency-32 goal in K paired rounds (--rounds K; 0 skips): an
#    offline run, then concurrency 32 against the running service, K times
#    in turn; each round's ratio and their median. This machine's speed
#    drifts by a fifth within minutes, so a ratio of two runs taken minutes
#    apart says little; neighbours in time share the drift. Also where the
#    cores' time went in those runs: the server's decoding workers, its HTTP
#    threads and other threads (by thread name, from /proc's schedstat),
#    the load generator, the rest.
# 3. Held connections (--hold IDLE,SLOW; 0,0 skips): bench/serve_hold.py keeps
#    IDLE connections that send nothing and SLOW ones that send their headers
#    a byte a second open from other loopback addresses, opening again
#    whatever the server closes; after 12 s of that, concurrency 8 again
#    (4 R requests), beside the unloaded concurrency-8 level. Also: the
#    connections the server held (ss, sampled each second), and its resident
#    memory.
# 4. --soak-minutes M: rounds of 500 requests at concurrency 32 for M
#    minutes; the server's resident memory (VmRSS) after every round.
# Writes OUT/serve.md and OUT/serve.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
checkpoint="" longest=0 lines=data/real/test.zh sentences=500 requests=2000 threads=2 soak=0 out=docs/bench compute=() hold=10000,1000
beam_offline=() beam_load=()
rounds=9
while (($#)); do
  case $1 in
    --checkpoint) checkpoint=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    --longest) longest=1; shift ;;
    --sentences) sentences=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --soak-minutes) soak=$2; shift 2 ;;
    --compute-type) compute=(--compute-type "$2"); shift 2 ;;
    --hold) hold=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --beam)
      [[ $2 =~ ^[0-9]$ ]] || { echo "bench_serve: --beam wants 0..8, not '$2'" >&2; exit 2; }
      beam_offline=(--beam "$2") beam_load=(--beam "$((10#$2 > 1 ? 10#$2 : 1))"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_serve: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$checkpoint" ] || { echo "bench_serve: --checkpoint DIR is required" >&2; exit 2; }
# Counts: a whole number each (at least 1 where 0 would mean nothing to measure).
for flag in sentences:1 requests:1 threads:1 soak-minutes:0 rounds:0; do
  name=${flag%:*} least=${flag#*:} var=${name%-minutes}
  value=${!var}
  [[ $value =~ ^[0-9]+$ ]] && ((10#$value >= least)) ||
    { echo "bench_serve: --$name wants a whole number of at least $least, not '$value'" >&2; exit 2; }
done
nmt=${NMT_BUILD_DIR:-build}/nmt
[ -x "$nmt" ] || { echo "bench_serve: no $nmt (run scripts/setup.sh)" >&2; exit 2; }
serve_load=${NMT_BUILD_DIR:-build}/serve_load
[ -x "$serve_load" ] || { echo "bench_serve: no $serve_load (run scripts/setup.sh)" >&2; exit 2; }
python=/usr/bin/python3
work=$(mktemp -d)
server=""
cleanup() { [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$out"
if [ "$longest" = 1 ]; then
  described="the $sentences longest lines (in characters) of \`data/real/test.zh\` and \`valid.zh\` (\`--longest\`)"
  /usr/bin/python3 -c '
import sys
n = int(sys.argv[1])
lines = [l.rstrip("\n") for f in sys.argv[2:] for l in open(f, encoding="utf-8")]
print("\n".join(sorted(lines, key=lambda l: -len(l))[:n]))' "$sentences" data/real/test.zh data/real/valid.zh >"$work/lines.zh"
else
  described="the first $sentences sentences of \`$lines\`"
  head -n "$sentences" "$lines" >"$work/lines.zh"
fi
n=$(wc -l <"$work/lines.zh")

# The offline reference translates as many sentences as a load level sends
# (R, going round the N), three times; its median is the reference (one
# pass over 500 short sentences took 0.7 s, and varied by a fifth from run
# to run). Its first N lines are the answers every request must equal.
awk -v r="$requests" '{ line[NR] = $0 } END { for (i = 0; i < r; i++) print line[i % NR + 1] }' "$work/lines.zh" \
  >"$work/requests.zh"
# offline_run: one offline pass over the requests' sentences; prints its sentences/s.
offline_run() {
  "$nmt" translate --checkpoint "$checkpoint" --input "$work/requests.zh" --output "$work/offline_all.en" \
    --threads "$threads" "${compute[@]}" "${beam_offline[@]}" --batch-size 32 2>"$work/offline.log"
  sed -n 's/.*translated [0-9]* lines in \([0-9.]*\) s (\([0-9.]*\) sentences\/s.*/\2/p' "$work/offline.log"
}
offline_runs=()
for run in 1 2 3; do
  echo "bench_serve: offline nmt translate over $requests sentences (the $n, round), run $run of 3" >&2
  offline_runs+=("$(offline_run)")
done
head -n "$n" "$work/offline_all.en" >"$work/offline.en"
offline=$(printf '%s\n' "${offline_runs[@]}" | sort -g | sed -n 2p)

# start_server MODE: nmt serve --batching MODE in the background; sets server and port.
start_server() {
  rm -f "$work/port"
  "$nmt" serve --checkpoint "$checkpoint" --port 0 --port-file "$work/port" --threads "$threads" "${compute[@]}" \
    --max-queue 4096 --batching "$1" >"$work/serve-$1.log" 2>&1 &
  server=$!
  for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
  [ -s "$work/port" ] || { echo "bench_serve: the server did not start:" >&2; tail -3 "$work/serve-$1.log" >&2; exit 1; }
  port=$(cat "$work/port")
  # A warm-up pass (first batches of each shape), not recorded.
  "$serve_load" --port "$port" --lines "$work/lines.zh" "${beam_load[@]}" --concurrency 8 --requests 64 >/dev/null
}
# load MODE C: one load level, its JSON line tagged with the batching mode.
load() {
  echo "bench_serve: --batching $1, concurrency $2" >&2
  "$serve_load" --port "$port" --lines "$work/lines.zh" "${beam_load[@]}" --concurrency "$2" --requests "$requests" \
    --expect "$work/offline.en" | sed "s/^{/{\"batching\": \"$1\", /" >>"$work/serve.jsonl"
}

: >"$work/serve.jsonl"
start_server static
load static 32
kill -TERM "$server" && wait "$server" || true
start_server continuous
for c in 1 8 32 128; do load continuous "$c"; done
# server_cpu: the server's CPU seconds so far (schedstat: nanoseconds on a
# CPU, per thread), summed by thread name: the decoding workers (nmt-batch),
# the HTTP threads (MHD-worker) and the rest; as JSON.
server_cpu() {
  $python - "$server" <<'PY'
import glob, json, sys
seconds = {"workers": 0.0, "http": 0.0, "other": 0.0}
for task in glob.glob(f"/proc/{sys.argv[1]}/task/*"):
    try:
        name = open(f"{task}/comm").read().strip()
        ns = int(open(f"{task}/schedstat").read().split()[0])
    except (OSError, ValueError, IndexError):
        continue
    seconds[{"nmt-batch": "workers", "MHD-worker": "http"}.get(name, "other")] += ns / 1e9
print(json.dumps(seconds))
PY
}
for round in $(seq "$rounds"); do
  echo "bench_serve: paired round $round of $rounds: offline, then concurrency 32" >&2
  paired_offline=$(offline_run)
  cpu_before=$(server_cpu)
  paired=$("$serve_load" --port "$port" --lines "$work/lines.zh" "${beam_load[@]}" --concurrency 32 --requests "$requests" \
    --expect "$work/offline.en")
  cpu_after=$(server_cpu)
  $python -c 'import json, sys
r = json.loads(sys.argv[1])
before, after = json.loads(sys.argv[4]), json.loads(sys.argv[5])
print(json.dumps({"paired_round": int(sys.argv[2]), "offline": float(sys.argv[3]), "serve": r["sentences_per_s"],
                  "failures": r["failures"], "seconds": r["seconds"], "client_cpu_s": r["client_cpu_s"],
                  "server_cpu_s": {k: round(after[k] - before[k], 3) for k in after}, "cores": int(sys.argv[6])}))' \
    "$paired" "$round" "$paired_offline" "$cpu_before" "$cpu_after" "$(nproc)" >>"$work/serve.jsonl"
done
hold_idle=${hold%,*} hold_slow=${hold#*,}
if [ "$hold_idle" -gt 0 ] || [ "$hold_slow" -gt 0 ]; then
  echo "bench_serve: $hold_idle idle and $hold_slow slow-header connections held, concurrency 8" >&2
  rss_before=$(awk '/VmRSS/ {print $2 / 1024}' "/proc/$server/status")
  $python bench/serve_hold.py "$port" "$hold_idle" "$hold_slow" >"$work/hold.json" &
  holder=$!
  held() { ss -Htn state established "( sport = :$port )" | wc -l; }
  : >"$work/held.txt"
  (while kill -0 "$holder" 2>/dev/null; do held >>"$work/held.txt"; sleep 1; done) &
  sampler=$!
  sleep 12
  # Four times the requests of a level: long enough to span the holders' waves
  # (the idle ones, opened together, are closed and reopened together).
  "$serve_load" --port "$port" --lines "$work/lines.zh" "${beam_load[@]}" --concurrency 8 --requests $((4 * requests)) \
    --expect "$work/offline.en" >"$work/held_load.json"
  rss=$(awk '/VmRSS/ {print $2 / 1024}' "/proc/$server/status")
  kill -TERM "$holder"; wait "$holder" || true
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
  $python - "$work/held_load.json" "$work/hold.json" "$work/held.txt" "$rss" "$rss_before" >>"$work/serve.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
h = json.load(open(sys.argv[2]))
held = [int(l) for l in open(sys.argv[3]) if l.strip()][12:]  # after the ramp
r.update({"batching": "continuous", "held_idle": h["idle"], "held_slow": h["slow"],
          "closed_by_server": h["closed_by_server"], "held_min": min(held, default=0),
          "held_median": sorted(held)[len(held) // 2] if held else 0, "server_rss_mb": round(float(sys.argv[4]), 1),
          "server_rss_mb_before": round(float(sys.argv[5]), 1)})
print(json.dumps(r))
PY
fi
soak_line=""
if [ "$soak" -gt 0 ]; then
  echo "bench_serve: soak, concurrency 32 for $soak minutes" >&2
  $python - "$port" "$work/lines.zh" "$soak" "$server" "$serve_load" >>"$work/serve.jsonl" <<'PY'
import json, subprocess, sys, time
port, lines, minutes, pid, serve_load = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
def rss():
    return next(int(l.split()[1]) / 1024 for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS"))
end = time.time() + 60 * minutes
samples, results, first = [], [], None
while time.time() < end:
    r = json.loads(subprocess.run([serve_load, "--port", port, "--lines", lines,
                                   "--concurrency", "32", "--requests", "500"], capture_output=True, text=True,
                                  check=True).stdout)
    results.append(r)
    samples.append(round(rss(), 1))
print(json.dumps({"soak_minutes": minutes, "rss_mb": samples, "requests": sum(r["requests"] for r in results),
                  "failures": sum(r["failures"] for r in results),
                  "statuses": {k: sum(r["statuses"].get(k, 0) for r in results)
                               for k in {k for r in results for k in r["statuses"]}}}))
PY
fi
cp "$work/serve.jsonl" "$out/serve.jsonl"
compute_name="as its config says"
[ ${#compute[@]} -eq 0 ] || compute_name=${compute[1]}
beam_name="the checkpoint's decode.beam"
[ ${#beam_offline[@]} -eq 0 ] || beam_name=$([ "${beam_offline[1]}" -le 1 ] && echo greedy || echo "beam ${beam_offline[1]}")
$python - "$work/serve.jsonl" "$offline" "$n" "$threads" "$checkpoint" "$requests" "$compute_name" "${offline_runs[*]}" \
  "$described" "$beam_name" >"$out/serve.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
offline, n, threads, ckpt, requests = float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
compute, offline_runs, described, beam = sys.argv[7], sys.argv[8].split(), sys.argv[9], sys.argv[10]
load = [r for r in rows if "concurrency" in r and r["batching"] == "continuous" and "held_idle" not in r]
held = next((r for r in rows if "held_idle" in r), None)
static = [r for r in rows if "concurrency" in r and r["batching"] == "static"]
print(f"# nmt serve under load\n\n`bench/bench_serve.sh`: {described}, {threads} thread{'' if threads == '1' else 's'}, "
      f"checkpoint `{ckpt}`, compute type {compute}, decoding: {beam}; closed-loop clients on loopback, one sentence per request, {requests} requests "
      f"per level going round the sentences.\n")
print(f"Offline `nmt translate --batch-size 32` over the {requests} sentences a level sends (the {n}, round): "
      f"**{offline:.1f} sentences/s**, the median of three runs ({', '.join(offline_runs)}).\n")
print("| batching | concurrency | sentences/s | vs offline | p50 ms | p95 ms | p99 ms | server translate p50 / p99 ms | statuses | failures | load generator CPU s / run s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in load + static:
    print(f"| {r['batching']} | {r['concurrency']} | {r['sentences_per_s']:.1f} | {r['sentences_per_s'] / offline:.2f} | {r['p50_ms']} | "
          f"{r['p95_ms']} | {r['p99_ms']} | {r['translate_p50_ms']} / {r['translate_p99_ms']} | "
          f"{', '.join(f'{k}: {v}' for k, v in sorted(r['statuses'].items()))} | {r['failures']} | "
          f"{r['client_cpu_s']} / {r['seconds']} |")
one = next((r for r in load if r["concurrency"] == 1), None)
c32 = next((r for r in load if r["concurrency"] == 32), None)
print("\n`continuous`: requests (greedy and beam) join the running batch between decoding steps and leave it when they end "
      "(the default); `static`: whole batches, each translated until its longest sentence ends.\n")
print("Goals:")
paired = [r for r in rows if "paired_round" in r]
if paired:
    ratios = [r["serve"] / r["offline"] for r in paired]
    middle = statistics.median(ratios)
    print(f"- concurrency 32, {len(paired)} paired rounds (an offline run, then the service, in turn): median "
          f"**{middle:.3f}** of offline throughput (goal >= 0.9); by round "
          f"{', '.join(f'{x:.3f}' for x in ratios)} ({min(ratios):.3f} to {max(ratios):.3f}, "
          f"{sum(x >= 0.9 for x in ratios)} of {len(ratios)} at 0.9 or more; offline "
          f"{min(r['offline'] for r in paired):.1f} to {max(r['offline'] for r in paired):.1f} sentences/s); "
          f"{sum(r['failures'] for r in paired)} failed requests (goal 0)")
if paired and all("server_cpu_s" in r for r in paired):
    # Of the cores' time during each round's run (cores × its seconds), the
    # share each kind of thread used; the median over the rounds. Offline
    # gives that time to its decoding threads alone.
    def share(r, used):
        return 100 * used / (r["cores"] * r["seconds"])
    parts = {"decoding workers": [share(r, r["server_cpu_s"]["workers"]) for r in paired],
             "HTTP threads": [share(r, r["server_cpu_s"]["http"]) for r in paired],
             "the server's other threads": [share(r, r["server_cpu_s"]["other"]) for r in paired],
             "the load generator": [share(r, r["client_cpu_s"]) for r in paired]}
    rest = [100 - sum(p[i] for p in parts.values()) for i in range(len(paired))]
    print(f"- where the time of the {paired[0]['cores']} cores went in those concurrency-32 runs (median over the rounds, "
          f"share of cores × run seconds; schedstat per thread): "
          + ", ".join(f"{k} {statistics.median(v):.1f}%" for k, v in parts.items())
          + f", the rest (idle, interrupts and kernel threads, other processes) {statistics.median(rest):.1f}%")
if c32:
    print(f"- concurrency 32, the table's run: {c32['sentences_per_s'] / offline:.2f} of the offline median above, "
          f"{c32['failures']} failed requests (goal 0)")
if one:
    print(f"- concurrency 1: p99 {one['p99_ms']} ms against a single translate call's p99 {one['translate_p99_ms']} ms "
          f"(the server's own time for a batch of that one sentence): {one['p99_ms'] / one['translate_p99_ms']:.2f}x "
          f"(goal <= 1.5x)")
c8 = next((r for r in load if r["concurrency"] == 8), None)
if held and c8:
    print(f"- concurrency 8 beside {held['held_idle']:,} idle and {held['held_slow']:,} slow-header connections "
          f"(opened again as the server closed them: {held['closed_by_server']:,} closed; the server held "
          f"{held['held_median']:,} at a time, at least {held['held_min']:,}): p50 / p95 / p99 {held['p50_ms']} / "
          f"{held['p95_ms']} / {held['p99_ms']} ms against {c8['p50_ms']} / {c8['p95_ms']} / {c8['p99_ms']} ms unloaded "
          f"(p99 {held['p99_ms'] - c8['p99_ms']:+.1f} ms; goal within +100 ms), {held['failures']} failed (goal 0), "
          f"{held['sentences_per_s']:.1f} sentences/s (unloaded {c8['sentences_per_s']:.1f}); the server's resident "
          f"memory {held['server_rss_mb_before']} MB before, {held['server_rss_mb']} MB holding them")
soak = next((r for r in rows if "soak_minutes" in r), None)
if soak:
    rss, minutes = soak["rss_mb"], soak["soak_minutes"]
    # Rounds take about the same time: round i ends near minute (i + 1) * minutes / rounds.
    marks = sorted({min(len(rss) - 1, max(0, round(f * len(rss) / minutes) - 1)) for f in range(0, int(minutes) + 1)})
    by_minute = ", ".join(f"{(i + 1) * minutes / len(rss):.1f} min {rss[i]}" for i in marks)
    print(f"- soak, {minutes:g} min at concurrency 32 ({len(rss)} rounds of 500 requests, {soak['requests']} in all, "
          f"{soak['failures']} failed): resident memory {rss[0]} MB after the first round, {rss[-1]} MB at the end "
          f"({100 * (rss[-1] - rss[0]) / rss[0]:+.1f}%); in the second half {rss[len(rss) // 2]} -> {rss[-1]} MB. "
          f"By time: {by_minute}")
PY
cat "$out/serve.md"
