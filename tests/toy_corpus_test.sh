#!/usr/bin/env bash
# The toy corpus is reproducible: scripts/make_toy_corpus.py with its data in
# scripts/toy_corpus/ regenerates data/toy/ byte for byte (a few seconds).
# After an intended change to the lexicon or grammar, regenerate data/toy/
# with the script and commit both.
# Usage: toy_corpus_test.sh SOURCE_DIR
set -u
src=$1
. "$(dirname "$0")/lib.sh"
make_temp_dir

if ! /usr/bin/python3 "$src/scripts/make_toy_corpus.py" --out "$tmp/out" >"$tmp/log" 2>&1; then
  echo "FAIL: make_toy_corpus.py failed:"
  cat "$tmp/log"
  exit 1
fi

for name in train valid test; do
  for lang in zh en; do
    f=$name.$lang
    if [ ! -f "$tmp/out/$f" ]; then
      bad "$f was not generated"
    elif ! cmp "$src/data/toy/$f" "$tmp/out/$f"; then
      bad "data/toy/$f differs from a fresh run (first differing lines:)"
      diff "$src/data/toy/$f" "$tmp/out/$f" | head -6
    else
      ok
    fi
  done
done
# Nothing beyond the six files (a stray split would go unnoticed otherwise).
for f in "$tmp"/out/*; do
  case ${f##*/} in
    train.zh | train.en | valid.zh | valid.en | test.zh | test.en) ;;
    *) bad "unexpected output file ${f##*/}" ;;
  esac
done
[ $fail -eq 0 ] && echo "toy corpus: data/toy/ matches a fresh run"
summary "toy corpus"
