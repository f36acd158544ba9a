#!/usr/bin/env bash
# `nmt train --nproc 2` end to end: the same losses as one process (float32:
# summation order differs, tolerance 1e-4 relative), a rank killed mid-run
# stops the job with one line naming it, within the timeout; with
# --max-restarts the group starts again from its last checkpoint and ends
# with the losses and validation loss of a run that was never interrupted.
# Usage: distributed_cli_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
. "$(dirname "$0")/lib.sh"
make_temp_dir
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

# Elastic restart: rank 1 dies at step 14, after the save at step 12; the
# group restarts from it and finishes. The same loss at every step (the
# restarted run's value for the steps it repeated) and the same final
# validation loss, which the final weights alone determine, as the straight
# 2-rank run. (model.pt's bytes are no witness: LibTorch's archive differs
# between two identical runs.)
sed 's/log_every: 5/log_every: 1/' "$tmp/tiny.yaml" >"$tmp/every.yaml"
losses() { /usr/bin/python3 -c "import json,sys
seen = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if 'train_loss' in r: seen[int(r['step'])] = '%.9f' % r['train_loss']
print(' '.join(seen[k] for k in sorted(seen)))" "$1"; }
final() { sed -n 's/^  loss: //p' "$1/last/state.yaml"; }
NMT_DIST_TIMEOUT=30 "$nmt" train --config "$tmp/every.yaml" --nproc 2 --set train.eval_every=4 \
  --set train.checkpoint_dir="$tmp/straight" >"$tmp/straight.log" 2>&1 || bad "straight: $(tail -3 "$tmp/straight.log")"
NMT_DIST_TIMEOUT=30 NMT_TEST_CRASH_AT=1:14 "$nmt" train --config "$tmp/every.yaml" --nproc 2 --max-restarts 2 \
  --set train.eval_every=4 --set train.checkpoint_dir="$tmp/elastic" >"$tmp/elastic.log" 2>&1
rc=$?
restarts=$(grep -c "launcher: restart [0-9]* of 2: rank 1 was killed by signal 9" "$tmp/elastic.log")
same=no
[ -n "$(final "$tmp/straight")" ] && [ "$(final "$tmp/straight")" = "$(final "$tmp/elastic")" ] &&
  [ "$(losses "$tmp/straight/metrics.jsonl")" = "$(losses "$tmp/elastic/metrics.jsonl")" ] && same=yes
if [ $rc -eq 0 ] && [ "$restarts" -eq 1 ] && grep -q "restart 1: continuing from $tmp/elastic's last checkpoint" "$tmp/elastic.log" &&
   grep -q "resuming $tmp/elastic/last at step 12" "$tmp/elastic.log" && [ $same = yes ]; then
  ok
else
  bad "elastic restart: exit $rc, $restarts restarts, final validation loss $(final "$tmp/straight") vs $(final "$tmp/elastic"): $(grep -E 'launcher|restart|error' "$tmp/elastic.log" | tail -4)"
fi
echo "elastic: rank 1 killed at step 14, $restarts restart, exit $rc, every step's loss and the final validation loss equal to the straight run's: $same"
# Without restarts left the launcher gives up, naming the cause.
NMT_DIST_TIMEOUT=30 NMT_TEST_CRASH_AT=1:6 "$nmt" train --config "$tmp/tiny.yaml" --nproc 2 --max-restarts 0 \
  --set train.checkpoint_dir="$tmp/no_restart" >"$tmp/no_restart.log" 2>&1
rc=$?
if [ $rc -eq 137 ] && ! grep -q "launcher: restart" "$tmp/no_restart.log"; then ok; else bad "--max-restarts 0: exit $rc"; fi

summary "distributed cli"
