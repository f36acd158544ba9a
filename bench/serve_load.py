#!/usr/bin/env python3
"""A bounded, closed-loop load generator for `nmt serve` on loopback.

C clients each send one sentence per request (cycling through LINES, each
client starting at its own offset) and wait for the answer before sending the
next, until N requests have been answered in total. Prints one JSON object:
sentences/s, latency percentiles (ms), the percentiles of the server's own
translation time of each request's batch (its Server-Timing header), status
counts and failures.

Usage: serve_load.py --port P --lines FILE --concurrency C --requests N [--expect FILE]
  --expect: the offline translations, line for line; answers that differ count as failures.
"""
import argparse
import http.client
import json
import statistics
import threading
import time


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--lines", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--expect")
    args = ap.parse_args()
    lines = [l.rstrip("\n") for l in open(args.lines, encoding="utf-8")]
    expect = [l.rstrip("\n") for l in open(args.expect, encoding="utf-8")] if args.expect else None

    lock = threading.Lock()
    issued = 0
    latencies, statuses, failures = [], {}, []
    translate_ms = []  # the batch's own translation time, from the Server-Timing header

    def take():
        nonlocal issued
        with lock:
            if issued >= args.requests:
                return None
            issued += 1
            return issued - 1

    def client(k):
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=120)
        while (n := take()) is not None:
            i = (k * 997 + n) % len(lines)
            body = json.dumps({"text": [lines[i]]})
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/v1/translate", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                payload = r.read()
                dt = time.perf_counter() - t0
                status = r.status
                for part in (r.getheader("Server-Timing") or "").split(","):
                    name, _, dur = part.strip().partition(";dur=")
                    if name == "translate" and dur:
                        with lock:
                            translate_ms.append(float(dur))
                ok = status == 200
                if ok and expect is not None and json.loads(payload)["translations"][0] != expect[i]:
                    ok = False
                    failures.append(f"line {i + 1}: answer differs from the offline translation")
            except Exception as e:  # counted, never fatal
                dt, status, ok = time.perf_counter() - t0, type(e).__name__, False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=120)
            with lock:
                statuses[str(status)] = statuses.get(str(status), 0) + 1
                if ok:
                    latencies.append(dt)
                elif status != 200:
                    failures.append(f"line {i + 1}: {status}")
        conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    lat = sorted(latencies)
    tr = sorted(translate_ms)
    print(json.dumps({
        "concurrency": args.concurrency,
        "requests": args.requests,
        "seconds": round(wall, 3),
        "sentences_per_s": round(len(lat) / wall, 2),
        "p50_ms": round(1000 * percentile(lat, 50), 1),
        "p95_ms": round(1000 * percentile(lat, 95), 1),
        "p99_ms": round(1000 * percentile(lat, 99), 1),
        "mean_ms": round(1000 * statistics.mean(lat), 1) if lat else None,
        "translate_p50_ms": round(percentile(tr, 50), 1),
        "translate_p99_ms": round(percentile(tr, 99), 1),
        "statuses": statuses,
        "failures": len(failures),
        "first_failures": failures[:3],
    }))


if __name__ == "__main__":
    main()
