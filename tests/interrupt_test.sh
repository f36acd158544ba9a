#!/usr/bin/env bash
# Signals: SIGINT/SIGTERM during `nmt train` finish the step, save last/ and
# exit 130/143, and --resume then continues exactly as an uninterrupted run
# (same logged losses); a second SIGINT waits for the save, a third aborts;
# SIGINT during `nmt translate --output` exits 130 and leaves no output file,
# and during `nmt check-po` exits 130 without a report.
# Usage: interrupt_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
. "$(dirname "$0")/lib.sh"
make_temp_dir
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
# Every step logged: the interrupted run's lines plus the resumed run's must
# be the straight run's lines.
sed -i 's/log_every: 5/log_every: 1/' "$tmp/tiny.yaml"
losses() { /usr/bin/python3 -c "import json,sys; print(' '.join('%.6f' % json.loads(l)['train_loss'] for l in open(sys.argv[1]) if 'train_loss' in l))" "$1"; }

# The reference: 60 steps straight.
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=60 --set train.checkpoint_dir="$tmp/straight" \
  >"$tmp/straight.log" 2>&1 || bad "straight run: $(tail -2 "$tmp/straight.log")"

# Waits until the log shows `pattern` (up to 60 s).
wait_for_log() { wait_until 60 grep -q "$2" "$1" 2>/dev/null; }

for sig in INT TERM; do
  dir=$tmp/run_$sig
  "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=60 --set train.checkpoint_dir="$dir" \
    >"$dir.log" 2>&1 &
  pid=$!
  wait_for_log "$dir.log" "step 15 " || bad "$sig: no progress"
  kill -$sig $pid
  wait $pid
  rc=$?
  want=$([ $sig = INT ] && echo 130 || echo 143)
  if [ $rc -eq $want ] && grep -q "saved; continue with: nmt train --resume $dir" "$dir.log" &&
    [ -f "$dir/last/manifest.txt" ]; then ok; else bad "SIG$sig: exit $rc (want $want): $(tail -3 "$dir.log")"; fi
  "$nmt" train --resume "$dir" --set train.max_steps=60 >"$dir.resume.log" 2>&1 ||
    bad "SIG$sig resume: $(tail -2 "$dir.resume.log")"
  # Logged every 5 steps: the interrupted run's lines up to its stop, then the resumed run's.
  a=$(losses "$tmp/straight/metrics.jsonl") b=$(losses "$dir/metrics.jsonl")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "SIG$sig: losses after resume differ: [$a] vs [$b]"; fi
done

# Two SIGINTs while saving: the save completes. Three: abort at once.
dir=$tmp/twice
NMT_TEST_SAVE_DELAY_MS=3000 "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=60 \
  --set train.checkpoint_dir="$dir" >"$dir.log" 2>&1 &
pid=$!
wait_for_log "$dir.log" "step 10 " || bad "twice: no progress"
kill -INT $pid; sleep 1; kill -INT $pid
wait $pid
rc=$?
if [ $rc -eq 130 ] && grep -q "still finishing and saving" "$dir.log" && [ -f "$dir/last/manifest.txt" ]; then ok
else bad "two SIGINTs: exit $rc, last/ $(ls "$dir/last" 2>&1 | head -1): $(tail -3 "$dir.log")"; fi
dir=$tmp/thrice
NMT_TEST_SAVE_DELAY_MS=20000 "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=60 \
  --set train.checkpoint_dir="$dir" >"$dir.log" 2>&1 &
pid=$!
wait_for_log "$dir.log" "step 10 " || bad "thrice: no progress"
start=$(date +%s)
kill -INT $pid; sleep 1; kill -INT $pid; sleep 0.5; kill -INT $pid
wait $pid
rc=$?
if [ $rc -eq 130 ] && grep -q "nmt: aborted" "$dir.log" && [ $(($(date +%s) - start)) -lt 10 ]; then ok
else bad "three SIGINTs: exit $rc after $(($(date +%s) - start)) s: $(tail -2 "$dir.log")"; fi

# translate: SIGINT leaves no --output behind.
for i in $(seq 3000); do echo "我爱水课 他喜欢猫 我们明天去学校"; done >"$tmp/many.zh"
"$nmt" translate --checkpoint "$tmp/straight" --input "$tmp/many.zh" --output "$tmp/out.en" --batch-size 8 \
  >"$tmp/tr.log" 2>&1 &
pid=$!
wait_for_log "$tmp/tr.log" "checkpoint" || bad "translate did not start"
sleep 1
kill -INT $pid
wait $pid
rc=$?
if [ $rc -eq 130 ] && [ ! -e "$tmp/out.en" ] && [ -z "$(ls "$tmp" | grep 'out.en.tmp')" ]; then ok
else bad "translate SIGINT: exit $rc, output $(ls "$tmp" | grep out.en)"; fi

# check-po: SIGINT while it scores (back-translations of one token are quick,
# then every entry is scored against its msgid and rivals) stops it between
# batches: exit 130, no report.
{
  printf 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
  for i in $(seq 20000); do printf '\nmsgid "he likes cats %d"\nmsgstr "他喜欢猫 我们明天去学校 %d"\n' $i $i; done
} >"$tmp/many.po"
"$nmt" check-po "$tmp/many.po" --checkpoint "$tmp/straight" --max-len 1 --threads 1 >"$tmp/po.out" 2>"$tmp/po.log" &
pid=$!
wait_for_log "$tmp/po.log" "checkpoint" || bad "check-po did not start"
sleep 2
kill -INT $pid
start=$(date +%s)
wait $pid
rc=$?
if [ $rc -eq 130 ] && [ ! -s "$tmp/po.out" ] && [ $(($(date +%s) - start)) -lt 10 ]; then ok
else bad "check-po SIGINT: exit $rc after $(($(date +%s) - start)) s, stdout: $(head -c 200 "$tmp/po.out"), log: $(tail -2 "$tmp/po.log")"; fi

summary interrupts
