#!/usr/bin/env bash
# Crash safety by fault injection:
#  1. `nmt train` killed with SIGKILL at random moments (saves are frequent
#     and slowed down, so many kills land inside one), then resumed: every
#     time the resume must work and lose at most the steps since the last
#     save; the run that finally completes logs exactly the losses of an
#     uninterrupted run.
#  2. A full disk (injected: NMT_TEST_WRITE_LIMIT; and a real 3 MB tmpfs
#     where this machine lets us mount one): one line naming the file,
#     exit 1, and the previous last/ intact.
# Usage: crash_test.sh NMT_BINARY SOURCE_DIR [KILLS]
set -u
nmt=$1
src=$2
kills=${3:-30}
tmp=$(mktemp -d)
trap 'umount "$tmp/tiny_fs" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
. "$(dirname "$0")/tiny_config.sh"
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
sed -i 's/log_every: 5/log_every: 1/; s/eval_every: 1000/eval_every: 4/' "$tmp/tiny.yaml"
steps=80
losses() { /usr/bin/python3 -c "
import json, sys
seen = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if 'train_loss' in r: seen[int(r['step'])] = '%.6f' % r['train_loss']  # a repeated step: the resumed run's
print(' '.join(seen[k] for k in sorted(seen)))" "$1"; }
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
  if grep -q "nmt: error" "$tmp/kill_$tried.log" 2>/dev/null || grep -q "nmt: error\|runtime error" "$tmp/kill_$((tried - 1)).log"; then
    bad "kill $tried: the run before it failed: $(grep 'nmt:' "$tmp/kill_$((tried - 1)).log" | tail -1)"
  fi
  grep -q "resuming" "$tmp/kill_$((tried - 1)).log" && resumed=$((resumed + 1))
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

# 2. Full disk, injected: room for the first save (step 4), not the second.
dir=$tmp/full
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=4 --set train.checkpoint_dir="$tmp/one_save" >/dev/null 2>&1
one=$(du -sb "$tmp/one_save" | cut -f1)
NMT_TEST_WRITE_LIMIT=$((one + one / 2)) "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=12 \
  --set train.checkpoint_dir="$dir" >"$tmp/full.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && [ "$(grep -c '^nmt: error' "$tmp/full.log")" -eq 1 ] &&
  grep -q "^nmt: error: $dir.*: cannot write: No space left on device" "$tmp/full.log" &&
  [ "$(saved_step "$dir")" -eq 4 ] && ! ls "$dir" | grep -q "tmp\."; then ok
else bad "injected full disk: exit $rc, last/ at step $(saved_step "$dir"): $(grep 'nmt:' "$tmp/full.log" | tail -2)"; fi
"$nmt" train --resume "$dir" --set train.max_steps=8 >"$tmp/after_full.log" 2>&1 && ok ||
  bad "resume after the full disk: $(tail -2 "$tmp/after_full.log")"

# ... and a real one, where mounting is allowed.
mkdir -p "$tmp/tiny_fs"
if mount -t tmpfs -o size=3m tmpfs "$tmp/tiny_fs" 2>/dev/null; then
  "$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=12 --set train.checkpoint_dir="$tmp/tiny_fs/run" \
    >"$tmp/tmpfs.log" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && grep -q "^nmt: error: $tmp/tiny_fs/run.*No space left on device" "$tmp/tmpfs.log"; then ok
  else bad "3 MB tmpfs: exit $rc: $(grep 'nmt:' "$tmp/tmpfs.log" | tail -2)"; fi
  echo "real full disk (3 MB tmpfs): $(grep '^nmt: error' "$tmp/tmpfs.log")"
else
  echo "real full disk: skipped (this machine does not allow mounting a tmpfs)"
fi

echo "crash safety: $pass passed, $fail failed"
[ $fail -eq 0 ]
