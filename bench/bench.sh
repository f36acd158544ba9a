#!/usr/bin/env bash
# Benchmarks the attention backends (`nmt bench-attention`), then draws the
# results: docs/bench/<device>.csv, <device>_time.svg, <device>_memory.svg and
# <device>.md (a --quick run writes <device>_quick.* instead, so that it never
# overwrites the full run). Extra arguments go to bench-attention, e.g.
#   bench/bench.sh --device cuda          # -> docs/bench/cuda.*
#   bench/bench.sh --quick                # the reduced CI set, under a minute
# NMT_SKIP_SETUP=1 skips scripts/setup.sh (when the build is known current).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${NMT_SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh
nmt=${NMT_BUILD_DIR:-build}/nmt

# Only what the caller did not choose: CLI11 rejects a flag given twice.
device=cpu quick="" csv="" have_threads=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --device) device=${args[i + 1]:-cpu} ;;
    --device=*) device=${args[i]#--device=} ;;
    --quick) quick=_quick ;;
    --csv) csv=${args[i + 1]:-} ;;
    --csv=*) csv=${args[i]#--csv=} ;;
    --threads | --threads=*) have_threads=1 ;;
  esac
done
extra=()
if [ -z "$csv" ]; then
  csv=docs/bench/${device}${quick}.csv
  extra+=(--csv "$csv")
fi
((have_threads)) || extra+=(--threads 0)
mkdir -p "$(dirname "$csv")"

started=$(mktemp)
trap 'rm -f "$started"' EXIT
status=0
"$nmt" bench-attention "${extra[@]}" "$@" || status=$?
# 1 = some case failed: the CSV still holds the others, so draw them (and
# still fail). Draw only a CSV this run wrote, never an older one.
if [ "$status" -ne 0 ] && [ ! "$csv" -nt "$started" ]; then exit "$status"; fi
/usr/bin/python3 bench/plot_bench.py "$csv"
exit "$status"
