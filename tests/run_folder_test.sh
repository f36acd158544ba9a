#!/usr/bin/env bash
# One writer, any number of readers per run folder:
# 1. translate / evaluate / check-causality polling a run folder while a
#    trainer saves every 2 steps never fail, and the trainer never fails;
# 2. a reader started while the trainer is paused inside a save (last.tmp
#    complete, not yet swapped in) leaves the folder exactly as it was;
# 3. a second trainer, or a --resume, while the first runs exits 2 naming it;
#    a fresh train into a folder with checkpoints exits 2 naming --resume and
#    --overwrite; --overwrite starts afresh, deleting checkpoints only (a
#    user's file in best/ stops it); a SIGKILLed trainer leaves no lock.
# Usage: run_folder_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
. "$(dirname "$0")/lib.sh"
make_temp_dir
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
head -3 "$src/data/toy/valid.zh" >"$tmp/three.zh"
head -3 "$src/data/toy/valid.en" >"$tmp/three.en"
# Entries with inode, size and change time: equal listings mean unchanged.
listing() { find "$1" -printf '%p %i %s %C@\n' | sort; }

# 1. Readers in a loop while a trainer saves last/ (and best/) every 2 steps.
run=$tmp/polled
NMT_TEST_SAVE_DELAY_MS=100 "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=60 --set train.eval_every=2 \
  --set train.checkpoint_dir="$run" >"$tmp/polled.log" 2>&1 &
trainer=$!
reads=0 failed=0
wait_until 30 test -f "$run/last/manifest.txt"
while kill -0 "$trainer" 2>/dev/null; do
  for cmd in "translate --checkpoint $run --input $tmp/three.zh" \
             "evaluate --checkpoint $run --src $tmp/three.zh --ref $tmp/three.en" \
             "check-causality --checkpoint $run --sentences 2"; do
    kill -0 "$trainer" 2>/dev/null || break
    # shellcheck disable=SC2086
    if "$nmt" $cmd >"$tmp/reader.log" 2>&1; then reads=$((reads + 1))
    else failed=$((failed + 1)); echo "reader failed: nmt $cmd: $(tail -1 "$tmp/reader.log")"; fi
  done
done
wait "$trainer"
rc=$?
if [ $rc -eq 0 ] && [ $failed -eq 0 ] && [ $reads -ge 3 ]; then ok
else bad "trainer exit $rc ($(grep '^nmt:' "$tmp/polled.log" | tail -1)), $failed of $((reads + failed)) reads failed"; fi
echo "readers: $reads reads during 30 saves, $failed failed; trainer exit $rc"

# 2. A reader during a save paused before its swap: nothing in the folder changes.
#    The trainer holds its second save of last/ (the first replacing one),
#    creating $hold, until $hold is removed: through the readers and the
#    refusals of part 3.
run=$tmp/paused
hold=$tmp/hold
NMT_TEST_HOLD=save-replace:$hold "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=4 --set train.eval_every=2 \
  --set train.checkpoint_dir="$run" >"$tmp/paused.log" 2>&1 &
trainer=$!
# the second save (step 4) staged complete, the first in place
wait_until 60 test -f "$hold"
[ -f "$run/last.tmp/manifest.txt" ] && [ -f "$run/last/manifest.txt" ] && ok ||
  bad "the held save: $(ls "$run" 2>&1 | tr '\n' ' ')"
before=$(listing "$run")
"$nmt" translate --checkpoint "$run" --input "$tmp/three.zh" >/dev/null 2>"$tmp/paused_reader.log" ||
  bad "reader during a paused save: $(tail -1 "$tmp/paused_reader.log")"
"$nmt" evaluate --checkpoint "$run/last" --src "$tmp/three.zh" --ref "$tmp/three.en" >/dev/null 2>&1 ||
  bad "evaluate during a paused save"
after=$(listing "$run")
if [ -n "$before" ] && [ "$before" = "$after" ] && [ -d "$run/last.tmp" ]; then ok
else bad "a reader changed the run folder during a save:"; diff <(echo "$before") <(echo "$after") | head -5; fi

# 3. A second writer is refused while the first runs, naming it.
expect_refused() {  # what pattern -- command...
  local what=$1 pattern=$2
  shift 3
  "$@" >"$tmp/second.log" 2>&1
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$pattern" "$tmp/second.log"; then ok
  else bad "$what: exit $rc (want 2 and /$pattern/): $(grep '^nmt:' "$tmp/second.log" | tail -1)"; fi
}
expect_refused "second trainer" "another nmt train is writing this run folder (pid $trainer on " -- \
  "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=4 --set train.checkpoint_dir="$run"
expect_refused "resume while running" "another nmt train is writing this run folder (pid $trainer on " -- \
  "$nmt" train --resume "$run" --set train.max_steps=8
rm -f "$hold"
wait "$trainer" || bad "the paused trainer failed: $(grep '^nmt:' "$tmp/paused.log" | tail -1)"

# A finished run is not started over by accident; --overwrite does it on purpose.
expect_refused "fresh train into a used folder" "already holds checkpoints (last/, best/); continue that run with \`nmt train --resume $run\`.*--overwrite" -- \
  "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=4 --set train.checkpoint_dir="$run"
expect_refused "--overwrite with --resume" "does not go with --resume" -- "$nmt" train --resume "$run" --overwrite
# --overwrite deletes checkpoints only: a file of the user's in best/ (or in
# a best.old/ of theirs) stops it before anything is removed.
for where in best best.old; do
  mkdir -p "$run/$where" && echo "my notes" >"$run/$where/notes.txt"
  before=$(listing "$run" | grep -v train.lock)
  expect_refused "--overwrite over a user's file in $where/" "$run/$where/notes.txt: not written by nmt" -- \
    "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=2 --set train.checkpoint_dir="$run" --overwrite
  [ "$before" = "$(listing "$run" | grep -v train.lock)" ] && ok || bad "a refused --overwrite changed $run"
  rm "$run/$where/notes.txt"
done
rmdir "$run/best.old"
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=2 --set train.eval_every=2 --set train.checkpoint_dir="$run" \
  --overwrite >"$tmp/over.log" 2>&1 && grep -q "^step: 2$" "$run/last/state.yaml" && ok ||
  bad "--overwrite: $(grep '^nmt:' "$tmp/over.log" | tail -1)"

# A trainer killed outright leaves no lock behind.
"$nmt" train --resume "$run" --set train.max_steps=100000 >"$tmp/killed.log" 2>&1 &
killed=$!
wait_until 30 grep -q "pid $killed" "$run/train.lock" 2>/dev/null
sleep 1
kill -KILL "$killed"
wait "$killed" 2>/dev/null
"$nmt" train --resume "$run" --set train.max_steps=4 >"$tmp/after_kill.log" 2>&1 && ok ||
  bad "resume after SIGKILL: $(grep '^nmt:' "$tmp/after_kill.log" | tail -1)"

# 4. A run folder copied elsewhere and resumed goes on in the copy; the
#    original is left as it was (its config still names the original).
copy=$tmp/copied
cp -r "$run" "$copy"
rm -f "$copy/train.lock"
# (train.lock is rewritten by every trainer that takes the lock, by design)
before=$(listing "$run" | grep -v train.lock)
target=$(($(sed -n 's/^step: //p' "$run/last/state.yaml") + 2))
"$nmt" train --resume "$copy" --set train.max_steps=$target --set train.eval_every=2 >"$tmp/copy.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^step: $target$" "$copy/last/state.yaml" && [ "$before" = "$(listing "$run" | grep -v train.lock)" ]; then ok
else bad "resuming a copied run: exit $rc, copy at $(grep '^step' "$copy/last/state.yaml"), original changed: $([ "$before" = "$(listing "$run" | grep -v train.lock)" ] && echo no || echo yes)"; fi
# ... and a checkpoint of another run resumed into a folder that holds this
# one's is refused (a copy of one of its own saves is not another run's).
other=$tmp/other
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=2 --set train.eval_every=2 \
  --set train.checkpoint_dir="$other" >"$tmp/other.log" 2>&1 || bad "training another run: $(tail -1 "$tmp/other.log")"
expect_refused "resume into another run's folder" "train.checkpoint_dir: $run holds another run's checkpoints (last/); resuming $other/best (a checkpoint of $other) would replace them" -- \
  "$nmt" train --resume "$other/best" --set train.checkpoint_dir="$run" --set train.max_steps=8
[ "$before" = "$(listing "$run" | grep -v train.lock)" ] && ok || bad "a refused resume changed $run"

# 4. A run that fails before its first save takes back what it made: a folder
#    it created is gone (no empty tokenizer/, no train.lock); in a folder that
#    was there already, what was there stays and nothing of the run's is left.
#    (The corpus's preparation fails: after the run folder is made.)
head -100 "$src/data/toy/train.zh" >"$tmp/bad.zh" && printf 'bad \377 line\n' >>"$tmp/bad.zh"
head -101 "$src/data/toy/train.en" >"$tmp/bad.en"
fresh=$tmp/fresh-fail
"$nmt" train --config "$tmp/tiny.yaml" --set data.train_src="$tmp/bad.zh" --set data.train_tgt="$tmp/bad.en" \
  --set train.checkpoint_dir="$fresh" >"$tmp/fresh-fail.log" 2>&1
rc=$?
if [ $rc -eq 2 ] && [ ! -e "$fresh" ]; then ok
else bad "a run failing before its first save: exit $rc, left: $(find "$fresh" 2>/dev/null | tr '\n' ' ')"; fi
kept=$tmp/kept-fail
mkdir -p "$kept" && echo mine >"$kept/notes.txt"
"$nmt" train --config "$tmp/tiny.yaml" --set data.train_src="$tmp/bad.zh" --set data.train_tgt="$tmp/bad.en" \
  --set train.checkpoint_dir="$kept" >"$tmp/kept-fail.log" 2>&1
rc=$?
if [ $rc -eq 2 ] && [ "$(cd "$kept" && find . | sort | tr '\n' ' ')" = ". ./notes.txt ./train.lock " ]; then ok
else bad "a failing run in a folder of the user's: exit $rc, now holds: $(cd "$kept" && find . | sort | tr '\n' ' ')"; fi
# A --profile run saves nothing and leaves nothing.
"$nmt" train --config "$tmp/tiny.yaml" --profile 2 --set train.checkpoint_dir="$tmp/profiled" >"$tmp/profiled.log" 2>&1 ||
  bad "--profile: $(tail -1 "$tmp/profiled.log")"
[ ! -e "$tmp/profiled" ] && ok || bad "--profile left $(find "$tmp/profiled" | tr '\n' ' ')"

summary "run folder"
