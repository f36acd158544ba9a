#!/usr/bin/env bash
# Sets up and builds if needed, then runs the whole test suite with ctest
# (and, with no arguments, scripts/fuzz.sh --smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# CTranslate2 and the scorers from PyPI (pinned, seconds, once per machine):
# the export round-trip test runs CTranslate2 on what `nmt export` writes.
bench/peers_env.sh --light >/dev/null
build_dir=${NMT_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" "$@"
# The whole suite (no ctest arguments) includes the libFuzzer harnesses over
# their seeds and 5 s each: builds build-fuzz/ (clang, ASan+UBSan) if needed.
if [ $# -eq 0 ]; then
  scripts/fuzz.sh --smoke
fi
