#!/usr/bin/env bash
# `nmt train --nproc 2` end to end: the same losses as one process (float32:
# summation order differs, tolerance 1e-4 relative), a rank killed mid-run
# stops the job with one line naming it, within the timeout.
# Usage: distributed_cli_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/tiny_config.sh"
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"

"$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/one" >"$tmp/one.log" 2>&1 || bad "1 process: $(tail -2 "$tmp/one.log")"
NMT_DIST_TIMEOUT=30 "$nmt" train --config "$tmp/tiny.yaml" --nproc 2 --set train.checkpoint_dir="$tmp/two" >"$tmp/two.log" 2>&1 ||
  bad "2 ranks: $(tail -3 "$tmp/two.log")"
if /usr/bin/python3 - "$tmp/one/metrics.jsonl" "$tmp/two/metrics.jsonl" <<'PY'
import json, sys
def losses(p): return [json.loads(l)["train_loss"] for l in open(p) if '"train_loss"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if a and len(a) == len(b) else 1.0
print(f"nproc 2 vs 1: {len(a)} logged losses, worst relative difference {worst:.2e}")
sys.exit(0 if len(a) == 6 and worst < 1e-4 else 1)
PY
then ok; else bad "the 2-rank losses differ from the 1-process losses"; fi

start=$(date +%s)
NMT_DIST_TIMEOUT=30 NMT_TEST_CRASH_AT=1:12 "$nmt" train --config "$tmp/tiny.yaml" --nproc 2 \
  --set train.checkpoint_dir="$tmp/crash" >"$tmp/crash.log" 2>&1
rc=$?
took=$(($(date +%s) - start))
if [ $rc -eq 137 ] && grep -q "launcher: rank 1 was killed by signal 9" "$tmp/crash.log" && [ $took -le 60 ]; then
  ok
else
  bad "killed rank: exit $rc after ${took}s: $(grep -E 'launcher|error' "$tmp/crash.log" | tail -3)"
fi

echo "distributed cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
