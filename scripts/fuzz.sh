#!/usr/bin/env bash
# Runs the libFuzzer harnesses (tests/fuzz) built with clang, ASan and UBSan.
#
#   scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]   fuzz each for that long (default 60)
#   scripts/fuzz.sh --smoke [HARNESS...]                 CI: the seeds, then 5 s each
#
# Harnesses: config corpus checkpoint translate po shards (default: all). Configures and
# builds NMT_FUZZ_BUILD_DIR (default build-fuzz/) when needed. Each harness
# starts from a copy of tests/fuzz/corpus/HARNESS in BUILD/corpus/HARNESS,
# which keeps growing from run to run (the committed seeds are never
# written); --smoke uses a fresh scratch folder instead. Prints executions,
# exec/s, coverage and corpus size per harness; exits 1 if any harness found
# a crash, leak, timeout or out-of-memory, naming the reproducer:
#   BUILD/fuzz_HARNESS REPRODUCER
# replays it. Extra libFuzzer flags: NMT_FUZZ_ARGS="-only_ascii=1 ...".
set -euo pipefail
cd "$(dirname "$0")/.."

all=(config corpus checkpoint translate po shards safetensors)
smoke=0
seconds=60
if [ "${1:-}" = "--smoke" ]; then
  smoke=1
  seconds=5
  shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
harnesses=("$@")
((${#harnesses[@]})) || harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [ -d "tests/fuzz/corpus/$h" ] || { echo "fuzz: unknown harness '$h' (known: ${all[*]})" >&2; exit 2; }
done

build=${NMT_FUZZ_BUILD_DIR:-build-fuzz}
if [ -z "${NMT_FUZZ_NO_BUILD:-}" ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (Debian: apt-get install clang)" >&2; exit 2; }
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    cmake -S . -B "$build" "${generator[@]}" -DNMT_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  # Quiet when it builds; the log's end when it does not (CI shows only this script's output).
  if ! cmake --build "$build" -j"${NMT_FUZZ_JOBS:-$(nproc)}" >"$build/build.log" 2>&1; then
    echo "fuzz: building $build failed; the errors in $build/build.log:" >&2
    grep -E "error|FAILED" "$build/build.log" | head -20 >&2
    exit 1
  fi
fi

failed=0
for h in "${harnesses[@]}"; do
  bin="$build/fuzz_$h"
  artifacts="$build/artifacts/$h"
  mkdir -p "$artifacts" "$build/logs"
  if ((smoke)); then
    # New inputs go to the scratch folder (the first one); the seeds are read only.
    corpus=("$build/smoke/$h" "tests/fuzz/corpus/$h")
    rm -rf "$build/smoke/$h"
    mkdir -p "$build/smoke/$h"
  else
    corpus=("$build/corpus/$h")
    mkdir -p "$build/corpus/$h"
    cp -n "tests/fuzz/corpus/$h"/* "$build/corpus/$h/"
  fi
  log="$build/logs/$h.log"
  before=$(find "$artifacts" -type f | wc -l)
  rc=0
  start=$SECONDS
  # -timeout: an input that takes 10 s is a hang, reported like a crash.
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
    -dict="tests/fuzz/$h.dict" -artifact_prefix="$artifacts/" ${NMT_FUZZ_ARGS:-} "${corpus[@]}" \
    >"$log" 2>&1 || rc=$?
  elapsed=$((SECONDS - start))
  # A harness that dies at start-up prints no coverage: '|| true' keeps grep's
  # no-match from ending this script (pipefail) before it reports the failure.
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  runs=$(stat number_of_executed_units)
  cov=$({ grep -ao 'cov: [0-9]*' "$log" || true; } | tail -1 | cut -d' ' -f2)
  files=$(find "${corpus[0]}" -type f | wc -l)
  bytes=$(du -sb "${corpus[0]}" | cut -f1)
  printf 'fuzz %-10s %10s execs  %6s exec/s  %4s s  cov %5s  corpus %s files (%s bytes)  %s\n' \
    "$h" "${runs:-?}" "$(stat average_exec_per_sec)" "$elapsed" "${cov:-?}" "$files" "$bytes" "$log"
  after=$(find "$artifacts" -type f | wc -l)
  if ((rc != 0 || after > before)); then
    failed=1
    echo "fuzz $h: FAILED (exit $rc); the log's end:" >&2
    grep -aE 'ERROR|SUMMARY|violated|terminate|what\(\)' "$log" | head -5 >&2 || true
    grep -ao "Test unit written to .*" "$log" | sed "s|Test unit written to |reproduce: $bin |" >&2 || true
  fi
done
exit "$failed"
