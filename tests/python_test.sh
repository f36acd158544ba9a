#!/usr/bin/env bash
# `import nmt` as a user gets it: `pip install .` from this checkout (with
# the pinned build tools of the light peers' environment, no build
# isolation, into a folder of its own), then tests/python/test_nmt.py under
# pytest against a checkpoint `nmt train` makes here.
# Usage: python_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
. "$(dirname "$0")/lib.sh"
make_temp_dir
python=$("$src/bench/peers_env.sh" --light --check 2>/dev/null) || {
  echo "SKIP: the light peers' environment is missing (bench/peers_env.sh --light; scripts/test.sh runs it)"
  exit 77
}
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
head -40 "$src/data/toy/valid.zh" >"$tmp/lines.zh"
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=30 --set train.checkpoint_dir="$tmp/run" >"$tmp/train.log" 2>&1 ||
  bad "train: $(tail -2 "$tmp/train.log")"
start=$(now)
if "$python" -m pip install --no-build-isolation --no-deps --target "$tmp/site" "$src" >"$tmp/pip.log" 2>&1; then ok
else bad "pip install .: $(tail -5 "$tmp/pip.log")"; fi
built=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')
NMT_BINARY=$nmt NMT_TEST_CHECKPOINT="$tmp/run" NMT_TEST_LINES="$tmp/lines.zh" PYTHONPATH="$tmp/site" \
  "$python" -m pytest -q -p no:cacheprovider "$src/tests/python" 2>&1 | tail -15
[ "${PIPESTATUS[0]}" -eq 0 ] && ok || bad "pytest tests/python"
summary "python" "pip install . in $built s"
