#!/usr/bin/env bash
# Crash safety by fault injection:
#  1. `nmt train` killed with SIGKILL at random moments (saves are frequent
#     and slowed down, so many kills land inside one), then resumed: every
#     time the resume must work and lose at most the steps since the last
#     save; the run that finally completes logs exactly the losses of an
#     uninterrupted run, each step once.
#  2. A full disk (injected: NMT_TEST_WRITE_LIMIT; and a real tmpfs of one
#     and a half checkpoints where this machine lets us mount one): one line
#     naming the file, exit 1, last/ and best/ complete, nothing staged left.
# Usage: crash_test.sh NMT_BINARY SOURCE_DIR [KILLS]
set -u
nmt=$1
src=$2
kills=${3:-30}
. "$(dirname "$0")/lib.sh"
make_temp_dir
on_exit() { kill_jobs; umount "$tmp/tiny_fs" 2>/dev/null; }
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
sed -i 's/log_every: 5/log_every: 1/; s/eval_every: 1000/eval_every: 4/' "$tmp/tiny.yaml"
steps=200
# Every step's line once, in order (a resumed run drops the lines logged
# after the step it resumes from, which it logs again).
losses() { /usr/bin/python3 -c "
import json, sys
print(' '.join('%d:%.6f' % (r['step'], r['train_loss']) for r in map(json.loads, open(sys.argv[1])) if 'train_loss' in r))" "$1"; }
saved_step() { sed -n 's/^step: //p' "$1/last/state.yaml" 2>/dev/null || echo 0; }

"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=$steps --set train.checkpoint_dir="$tmp/straight" \
  >"$tmp/straight.log" 2>&1 || bad "straight run: $(tail -2 "$tmp/straight.log")"

# 1. Kill at random, resume, repeat.
dir=$tmp/crashy
RANDOM=7
tried=0 resumed=0 last_saved=0
while [ $tried -lt "$kills" ] && [ "$(saved_step "$dir")" -lt $steps ]; do
  if [ -d "$dir/last" ] || [ -d "$dir/last.tmp" ] || [ -d "$dir/last.old" ]; then
    cmd=(train --resume "$dir" --set train.max_steps=$steps)
  else
    cmd=(train --config "$tmp/tiny.yaml" --set train.max_steps=$steps --set train.checkpoint_dir="$dir")
  fi
  NMT_TEST_SAVE_DELAY_MS=400 "$nmt" "${cmd[@]}" >"$tmp/kill_$tried.log" 2>&1 &
  pid=$!
  sleep "$((RANDOM % 30 + 15))e-1"  # 1.5 .. 4.4 s
  kill -KILL $pid 2>/dev/null
  wait $pid 2>/dev/null
  tried=$((tried + 1))
  now=$(saved_step "$dir")
  log=$tmp/kill_$((tried - 1)).log
  grep -q "^nmt: \(runtime \)\?error" "$log" && bad "kill $tried: the run failed before the kill: $(grep '^nmt:' "$log" | tail -1)"
  grep -q "resuming" "$log" && resumed=$((resumed + 1))
  # Never backwards: a kill loses at most the steps since the last save.
  [ "$now" -ge "$last_saved" ] || bad "kill $tried: last/ went back from step $last_saved to $now"
  last_saved=$now
done
# Finish without kills, then compare with the straight run.
"$nmt" train --resume "$dir" --set train.max_steps=$steps >"$tmp/finish.log" 2>&1 || bad "final resume: $(tail -2 "$tmp/finish.log")"
a=$(losses "$tmp/straight/metrics.jsonl") b=$(losses "$dir/metrics.jsonl")
if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "after $tried kills the losses differ from the straight run"; fi
recovered=$(grep -l "recovered\|removed.*interrupted save" "$tmp"/kill_*.log "$tmp/finish.log" 2>/dev/null | wc -l)
echo "SIGKILL: $tried kills, $resumed resumes from a saved state, $recovered starts repaired a save cut short; final losses equal: $([ "$a" = "$b" ] && echo yes || echo no)"

# 2. Full disk, injected: room for about one and a half saves. The first
# save (last/ and best/ at step 4) fits; a later one runs out of space
# part-way. Whatever got saved must be complete, nothing half-written or
# staged may be left, and the error is one line naming the file.
complete() { [ -f "$1/manifest.txt" ] && "$nmt" translate --checkpoint "$1" --input "$tmp/one.zh" >/dev/null 2>&1; }
head -1 "$src/data/toy/test.zh" >"$tmp/one.zh"
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=4 --set train.checkpoint_dir="$tmp/one_save" >/dev/null 2>&1
one=$(du -sb "$tmp/one_save" | cut -f1)
full_disk_ok() {  # DIR LOG RC WHAT
  local dir=$1 log=$2 rc=$3 what=$4
  if [ "$rc" -eq 1 ] && [ "$(grep -c '^nmt: ' "$log")" -eq 1 ] &&
    grep -q "^nmt: error: $dir/.*No space left on device" "$log" &&
    [ "$(saved_step "$dir")" -ge 4 ] && complete "$dir/last" && complete "$dir/best" &&
    [ -z "$(find "$dir" -name '*.tmp*' -o -name '*.old')" ]; then ok
  else bad "$what: exit $rc, last/ at step $(saved_step "$dir"), left: $(find "$dir" -name '*.tmp*' -o -name '*.old' | head -3); $(grep '^nmt:' "$log" | tail -2)"; fi
  echo "$what: exit $rc, last/ kept at step $(saved_step "$dir"); $(grep '^nmt: ' "$log")"
}
dir=$tmp/full
NMT_TEST_WRITE_LIMIT=$((one + one / 2)) "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=12 \
  --set train.checkpoint_dir="$dir" >"$tmp/full.log" 2>&1
full_disk_ok "$dir" "$tmp/full.log" $? "injected full disk"
"$nmt" train --resume "$dir" --set train.max_steps=12 >"$tmp/after_full.log" 2>&1 && ok ||
  bad "resume after the full disk: $(tail -2 "$tmp/after_full.log")"

# ... and a real one, where mounting is allowed.
mkdir -p "$tmp/tiny_fs"
if mount -t tmpfs -o size=$(((one + one / 2) / 4096 * 4096)) tmpfs "$tmp/tiny_fs" 2>/dev/null; then
  "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=12 --set train.checkpoint_dir="$tmp/tiny_fs/run" \
    >"$tmp/tmpfs.log" 2>&1
  full_disk_ok "$tmp/tiny_fs/run" "$tmp/tmpfs.log" $? "real full disk ($(((one + one / 2) / 1024)) KiB tmpfs)"
else
  echo "real full disk: skipped (this machine does not allow mounting a tmpfs)"
fi

summary "crash safety"
