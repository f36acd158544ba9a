#!/usr/bin/env bash
# Command-line errors: exit code 2 and one line naming the file/key/line.
# Usage: cli_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# expect CODE PATTERN -- command...
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1 >/dev/null)
  rc=$?
  # Exactly one error line, and it says what is wrong (log lines may precede it).
  local errors
  errors=$(grep -E '^nmt: error: ' <<<"$out")
  if [ "$rc" -eq "$code" ] && [ "$(grep -c . <<<"$errors")" -eq 1 ] && grep -qE -- "$pattern" <<<"$errors"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $* -> exit $rc, stderr: $out (wanted exit $code and one line "nmt: error: .../$pattern/")"
  fi
}

printf 'model:\n  d_model: 64\n  haeds: 4\n' >"$tmp/typo.yaml"
expect 2 "typo.yaml:3: model.haeds: unknown key" -- "$nmt" train --config "$tmp/typo.yaml"
printf 'model:\n  d_model: 128\n  heads: 3\n' >"$tmp/heads.yaml"
expect 2 "heads.yaml:3: model.heads: 3 does not divide model.d_model 128" -- "$nmt" train --config "$tmp/heads.yaml"
printf 'train:\n  lr: fast\n' >"$tmp/type.yaml"
expect 2 "type.yaml:2: train.lr: expected a number, got 'fast'" -- "$nmt" train --config "$tmp/type.yaml"
expect 2 "nope.yaml: cannot open config file" -- "$nmt" train --config "$tmp/nope.yaml"
expect 2 "--set model.heads=x: model.heads: expected an integer" -- "$nmt" train --config "$src/configs/toy.yaml" --set model.heads=x
expect 2 "--attention" -- "$nmt" train --config "$src/configs/toy.yaml" --attention fast
expect 2 "The following argument was not expected|not expected|Unknown|unknown" -- "$nmt" train --config "$src/configs/toy.yaml" --bogus
expect 2 "A subcommand is required|subcommand" -- "$nmt"
expect 2 "no such checkpoint folder" -- "$nmt" translate --checkpoint "$tmp/none"
mkdir -p "$tmp/empty"
expect 2 "not a checkpoint" -- "$nmt" translate --checkpoint "$tmp/empty"
printf 'data:\n  train_src: %s/missing.zh\n' "$tmp" >"$tmp/data.yaml"
expect 2 "missing.zh: cannot open" -- "$nmt" train --config "$tmp/data.yaml" --set train.checkpoint_dir="$tmp/ck" --set tokenizer.cache_dir="$tmp/tok"
expect 2 "cuda" -- "$nmt" train --config "$src/configs/toy.yaml" --device cuda --set train.checkpoint_dir="$tmp/ck"

# --help lists every subcommand and flag, exit 0.
if "$nmt" --help | grep -q translate && "$nmt" train --help | grep -q -- --attention; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: --help"
fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
