#!/usr/bin/env bash
# float32 against bf16 decoding with the AVX-512 kernels (vdpbf16ps where the
# CPU has AVX512-BF16) and with the AVX2 kernels (NMT_CPU_ISA=avx2: bf16 is
# widened to float32, as on a CPU without AVX512-BF16), interleaved for
# ROUNDS rounds: greedy `nmt translate` of the first LINES lines of the input
# with a fixed length limit (--max-len 40 --max-len-factor 0), so that every
# run decodes about the same number of tokens whatever the compute type.
# Prints one line per run and the median bf16/float32 ratio per kernel set.
#
# Usage: bench/bench_compute_isa.sh CHECKPOINT [--input FILE] [--lines N] [--rounds R] [--threads T]
#   defaults: data/real/test.zh, 300 lines, 6 rounds, 2 threads
set -euo pipefail
cd "$(dirname "$0")/.."
input=data/real/test.zh lines=300 rounds=6 threads=2 checkpoint=
while (($#)); do
  case $1 in
    --input) input=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "bench_compute_isa: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) checkpoint=$1; shift ;;
  esac
done
[ -n "$checkpoint" ] || { echo "bench_compute_isa: no CHECKPOINT (see --help)" >&2; exit 2; }
nmt=${NMT_BUILD_DIR:-build}/nmt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n "$lines" "$input" >"$work/in.zh"
for ((round = 1; round <= rounds; round++)); do
  for isa in avx512 avx2; do
    for ct in float32 bf16; do
      env=()
      [ $isa = avx2 ] && env=(NMT_CPU_ISA=avx2)
      env "${env[@]}" "$nmt" translate --checkpoint "$checkpoint" --input "$work/in.zh" --output "$work/out.en" \
        --compute-type $ct --threads "$threads" --max-len 40 --max-len-factor 0 2>"$work/log"
      rate=$(grep -o '[0-9.]* sentences/s' "$work/log" | cut -d' ' -f1)
      limited=$(grep -o '[0-9]* of [0-9]* translations stopped' "$work/log" | cut -d' ' -f1)
      echo "$round $isa $ct $rate $limited $(grep -o 'CPU kernels [a-z0-9]*' "$work/log")"
    done
  done
done | tee "$work/runs"
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    rnd, isa, ct, rate = line.split()[:4]
    runs[(rnd, isa, ct)] = float(rate)
for isa in ("avx512", "avx2"):
    ratios = sorted(runs[(r, i, "bf16")] / runs[(r, i, "float32")] for (r, i, c) in runs if i == isa and c == "float32")
    print(f"{isa} kernels: bf16 / float32 = {statistics.median(ratios):.2f} (median of {len(ratios)} rounds; "
          f"{ratios[0]:.2f} to {ratios[-1]:.2f})")
PY
