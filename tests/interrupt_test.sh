#!/usr/bin/env bash
# Signals: SIGINT/SIGTERM during `nmt train` finish the step, save last/ and
# exit 130/143, and --resume then continues exactly as an uninterrupted run
# (same logged losses); a second SIGINT waits for the save, a third aborts;
# SIGINT during `nmt translate --output` exits 130 and leaves no output file,
# during `nmt check-po` exits 130 without a report, and during `nmt prepare`
# exits 130 leaving nothing staged (within 2 s while SentencePiece trains);
# the signals are taken on a thread of nmt's own, never one running products.
# Every signal is sent while the command is held at a known point by a test
# hook (NMT_TEST_HOLD, src/util/test_hooks.h), never after a guessed delay:
# the result must not depend on how fast the machine is. SCALE (default 1)
# multiplies the amount of work (steps, lines, entries) to check that.
# Usage: interrupt_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
. "$(dirname "$0")/lib.sh"
make_temp_dir
scale=${SCALE:-1}
scaled() { awk -v n="$1" -v s="$scale" 'BEGIN { v = int(n * s); print (v < 1 ? 1 : v) }'; }
steps=$(scaled 60)
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
# Every step logged: the interrupted run's lines plus the resumed run's must
# be the straight run's lines. A learning rate that decays over the budget
# (linear, to min_lr at max_steps): the resumed run goes on down the same line.
sed -i 's/log_every: 5/log_every: 1/' "$tmp/tiny.yaml"
sed -i 's/^train: {/train: {lr_schedule: linear, min_lr: 0.0001, /' "$tmp/tiny.yaml"
losses() { /usr/bin/python3 -c "import json,sys; print(' '.join('%.6f %.8g' % (json.loads(l)['train_loss'], json.loads(l)['lr']) for l in open(sys.argv[1]) if 'train_loss' in l))" "$1"; }

# The reference: $steps steps straight.
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=$steps --set train.checkpoint_dir="$tmp/straight" \
  >"$tmp/straight.log" 2>&1 || bad "straight run: $(tail -2 "$tmp/straight.log")"

# Waits (up to 60 s) until the command holds at its point: the hold file exists.
wait_held() { wait_until 60 test -f "$1"; }
at=$(( steps / 4 > 0 ? steps / 4 : 1 ))  # the step the signal comes after

for sig in INT TERM; do
  dir=$tmp/run_$sig
  NMT_TEST_HOLD=train-step@$at:$tmp/held_$sig "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=$steps \
    --set train.checkpoint_dir="$dir" >"$dir.log" 2>&1 &
  pid=$!
  wait_held "$tmp/held_$sig" || bad "$sig: never reached step $at"
  kill -$sig $pid
  wait $pid
  rc=$?
  want=$([ $sig = INT ] && echo 130 || echo 143)
  # The signal came while step $at was done: the run stops after the next step.
  if [ $rc -eq $want ] && grep -q "saved; continue with: nmt train --resume $dir" "$dir.log" &&
    grep -q "^step: $((at + 1))$" "$dir/last/state.yaml"; then ok
  else bad "SIG$sig: exit $rc (want $want), $(grep '^step' "$dir/last/state.yaml" 2>&1): $(tail -3 "$dir.log")"; fi
  "$nmt" train --resume "$dir" --set train.max_steps=$steps >"$dir.resume.log" 2>&1 ||
    bad "SIG$sig resume: $(tail -2 "$dir.resume.log")"
  # Logged every step: the interrupted run's lines up to its stop, then the resumed run's.
  a=$(losses "$tmp/straight/metrics.jsonl") b=$(losses "$dir/metrics.jsonl")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "SIG$sig: losses after resume differ: [$a] vs [$b]"; fi
done

# Which threads take SIGINT/SIGTERM: one of nmt's own ("nmt-signals"), never
# a thread that runs products. oneDNN's JIT float32 GEMM kernels (before
# 3.11) point the stack pointer into the heap while they run, and a handler
# run there wrote its frame over the heap: one SIGINT in five aborted
# training ("corrupted size vs. prev_size"). Checked in training held between
# steps with two threads (OpenMP's team started) and in a service that has
# answered a request; OpenBLAS's own workers, which start as it loads, are
# left out (OPENBLAS_NUM_THREADS=1).
# open_threads PID: the names of PID's threads open to SIGINT or SIGTERM,
# then "of N" (how many threads it has).
open_threads() {
  local t blocked names="" count=0
  for t in /proc/$1/task/*; do
    count=$((count + 1))
    blocked=$(awk '/^SigBlk:/ { print $2 }' "$t/status" 2>/dev/null) || continue
    # bit 1: SIGINT (2), bit 14: SIGTERM (15)
    if [ $(( 0x$blocked & 0x4002 )) -ne $(( 0x4002 )) ]; then names="$names$(cat "$t/comm" 2>/dev/null) "; fi
  done
  echo "${names}of $count"
}
# only_signal_thread_open PID: succeeds when nmt-signals is the only one of
# PID's threads (at least 3) open to them; $open says which were.
only_signal_thread_open() {
  open=$(open_threads "$1")
  [[ $open =~ ^nmt-signals\ of\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 3 ]
}
dir=$tmp/threads
OPENBLAS_NUM_THREADS=1 NMT_TEST_HOLD=train-step@3:$tmp/held_threads "$nmt" train --config "$tmp/tiny.yaml" \
  --set train.threads=2 --set train.max_steps=$steps --set train.checkpoint_dir="$dir" >"$dir.log" 2>&1 &
pid=$!
if wait_held "$tmp/held_threads"; then
  if only_signal_thread_open $pid; then ok
  else bad "training: threads open to SIGINT/SIGTERM: $open (want only nmt-signals)"; fi
  kill -INT $pid
  wait_exit $pid 60
  if [ "$rc" = 130 ] && [ -f "$dir/last/manifest.txt" ]; then ok
  else bad "SIGINT taken on nmt-signals: exit $rc: $(tail -2 "$dir.log")"; fi
else
  bad "threads: never reached step 3: $(tail -2 "$dir.log")"
fi
OPENBLAS_NUM_THREADS=1 "$nmt" serve --checkpoint "$tmp/straight" --port 0 --port-file "$tmp/serve.port" \
  --threads 2 >"$tmp/serve.log" 2>&1 &
pid=$!
if wait_until 60 test -s "$tmp/serve.port"; then
  answer=$(/usr/bin/python3 - "$(cat "$tmp/serve.port")" <<'PY'
import json, sys, urllib.request
r = urllib.request.Request("http://127.0.0.1:%s/v1/translate" % sys.argv[1], method="POST",
                           data=json.dumps({"text": "我爱水课"}).encode(), headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(r, timeout=30).status)
PY
  )
  if only_signal_thread_open $pid && [ "$answer" = 200 ]; then ok
  else bad "serve: answered ${answer:-nothing}; threads open to SIGINT/SIGTERM: $open (want only nmt-signals)"; fi
  kill -TERM $pid
  wait_exit $pid 30
  if [ "$rc" = 0 ]; then ok; else bad "serve SIGTERM: exit $rc: $(tail -2 "$tmp/serve.log")"; fi
else
  bad "serve did not start: $(tail -2 "$tmp/serve.log")"
fi

# Two SIGINTs, the second while the save is held: the save completes. Three:
# abort at once, the save still held.
for n in 2 3; do
  dir=$tmp/signals_$n
  NMT_TEST_HOLD=save:$tmp/saving_$n "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=100000 \
    --set train.checkpoint_dir="$dir" >"$dir.log" 2>&1 &
  pid=$!
  wait_until 60 grep -q "step 1 " "$dir.log" || bad "$n signals: no progress"
  kill -INT $pid
  wait_held "$tmp/saving_$n" || bad "$n signals: the interrupted run never saved"
  kill -INT $pid
  wait_until 60 grep -q "still finishing and saving" "$dir.log" || bad "$n signals: the second SIGINT was not said"
  if [ $n = 2 ]; then
    rm "$tmp/saving_$n"
    wait_exit $pid 60
    if [ "$rc" = 130 ] && [ -f "$dir/last/manifest.txt" ] && [ ! -e "$dir/last.tmp" ]; then ok
    else bad "two SIGINTs: exit $rc, last/ $(ls "$dir/last" 2>&1 | head -1): $(tail -3 "$dir.log")"; fi
  else
    start=$(now)
    kill -INT $pid
    wait_exit $pid 10 "$start"
    if [ "$rc" = 130 ] && grep -q "nmt: aborted" "$dir.log" && [ -e "$tmp/saving_$n" ]; then ok
    else bad "three SIGINTs: exit $rc: $(tail -2 "$dir.log")"; fi
  fi
done

# prepare: SIGINT while encoding leaves no staged folder and no prepared
# corpus; run again, it prepares from the start.
cat >"$tmp/prep.yaml" <<YAML
data: {train_src: $src/data/toy/train.zh, train_tgt: $src/data/toy/train.en, prepared_dir: $tmp/prep}
YAML
NMT_TEST_HOLD=prepare-round:$tmp/preparing "$nmt" prepare --config "$tmp/prep.yaml" >"$tmp/prep.log" 2>&1 &
pid=$!
wait_held "$tmp/preparing" || bad "prepare never encoded: $(tail -2 "$tmp/prep.log")"
kill -INT $pid
wait_exit $pid 30
if [ "$rc" = 130 ] && [ -z "$(ls "$tmp/prep" | grep -v '\.lock$')" ]; then ok
else bad "prepare SIGINT: exit $rc, left: $(ls "$tmp/prep" | tr '\n' ' ')"; fi
if "$nmt" prepare --config "$tmp/prep.yaml" >"$tmp/prep2.log" 2>&1 && grep -q "no prepared corpus yet" "$tmp/prep2.log"; then ok
else bad "prepare after an interrupt: $(tail -2 "$tmp/prep2.log")"; fi

# prepare: SIGINT while SentencePiece trains the tokenizers (configs/real.yaml:
# minutes on a large corpus, several seconds here) stops within 2 s: the
# trainer runs in a child process that the signal ends. Nothing is staged,
# and no trainer is left running.
"$nmt" prepare --config "$src/configs/real.yaml" --set data.prepared_dir="$tmp/prep_spm" \
  --set data.train_src="$src/data/real/train.zh" --set data.train_tgt="$src/data/real/train.en" >"$tmp/prep_spm.log" 2>&1 &
pid=$!
if wait_until 120 grep -q "tokenizer: training SentencePiece" "$tmp/prep_spm.log"; then
  start=$(now)
  kill -INT $pid
  wait_exit $pid 2 "$start"
  took=$(awk -v a="$start" -v b="$t_end" 'BEGIN { printf "%.2f", b - a }')
  left=$(ls "$tmp/prep_spm" | grep -v '\.lock$')
  if [ "$rc" = 130 ] && [ -z "$left" ] && ! pgrep -f "$tmp/prep_spm" >/dev/null; then ok
  else bad "prepare SIGINT during SentencePiece: exit $rc after $took s (want 130 within 2 s), left: $left: $(tail -2 "$tmp/prep_spm.log")"; fi
else
  kill -9 $pid 2>/dev/null
  bad "prepare never trained its tokenizers: $(tail -2 "$tmp/prep_spm.log")"
fi

# translate: SIGINT while decoding leaves no --output behind, and says so
# (not "finishing the current step", which is training's).
for i in $(seq "$(scaled 300)"); do echo "我爱水课 他喜欢猫 我们明天去学校"; done >"$tmp/many.zh"
NMT_TEST_HOLD=decode-step@2:$tmp/decoding "$nmt" translate --checkpoint "$tmp/straight" --input "$tmp/many.zh" \
  --output "$tmp/out.en" --batch-size 8 >"$tmp/tr.log" 2>&1 &
pid=$!
wait_held "$tmp/decoding" || bad "translate never decoded: $(tail -2 "$tmp/tr.log")"
kill -INT $pid
wait_exit $pid 30
if [ "$rc" = 130 ] && [ ! -e "$tmp/out.en" ] && [ -z "$(ls "$tmp" | grep 'out.en.tmp')" ]; then ok
else bad "translate SIGINT: exit $rc, output $(ls "$tmp" | grep out.en)"; fi
if grep -q "interrupted; stopping at the next batch (no --output file is written)" "$tmp/tr.log" &&
  ! grep -q "current step" "$tmp/tr.log"; then ok
else bad "translate SIGINT said: $(grep interrupted "$tmp/tr.log")"; fi

# check-po: SIGINT while it scores (after the back-translations, every entry
# is scored against its msgid and rivals) stops it between batches: exit
# 130, no report.
{
  printf 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
  for i in $(seq "$(scaled 2000)"); do printf '\nmsgid "he likes cats %d"\nmsgstr "他喜欢猫 我们明天去学校 %d"\n' $i $i; done
} >"$tmp/many.po"
NMT_TEST_HOLD=score-batch:$tmp/scoring "$nmt" check-po "$tmp/many.po" --checkpoint "$tmp/straight" --max-len 1 \
  --threads 1 >"$tmp/po.out" 2>"$tmp/po.log" &
pid=$!
wait_held "$tmp/scoring" || bad "check-po never scored: $(tail -2 "$tmp/po.log")"
kill -INT $pid
wait_exit $pid 30
if [ "$rc" = 130 ] && [ ! -s "$tmp/po.out" ]; then ok
else bad "check-po SIGINT: exit $rc, stdout: $(head -c 200 "$tmp/po.out"), log: $(tail -2 "$tmp/po.log")"; fi

summary interrupts
