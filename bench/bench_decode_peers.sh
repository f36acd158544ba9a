#!/usr/bin/env bash
# Decoding against CTranslate2: exports CHECKPOINT with `nmt export --format
# ctranslate2`, then translates data/real/test.zh with `nmt translate`
# (float32) and with CTranslate2 (float32 and int8) on that export, CPU, the
# same threads, greedy and beam search (--beams, default 4) at batch 32 and 1 (bench/decode_peers.py
# says how each figure is taken). Writes docs/bench/decode_peers.md.
# Needs the light peers environment (bench/peers_env.sh --light; made here
# if missing). --isa avx2 holds both to their AVX2 kernels (as an AVX2-only
# CPU runs them: bench/avx2_env.sh) and writes decode_peers_avx2.md instead.
# Usage: bench/bench_decode_peers.sh CHECKPOINT [--threads N] [--repeats R] [--lines G32,G1,B32,B1]
#        [--beams 2,4,5] [--isa native|avx2] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
checkpoint= threads=$(nproc) repeats=3 lines=2000,300,500,100 beams=4 isa=native out=docs/bench
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    --beams) beams=$2; shift 2 ;;
    --isa) isa=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "bench_decode_peers: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) checkpoint=$1; shift ;;
  esac
done
[ -n "$checkpoint" ] || { echo "bench_decode_peers: no CHECKPOINT (see --help)" >&2; exit 2; }
case $isa in
  native) report=decode_peers.md ;;
  avx2) report=decode_peers_avx2.md; source bench/avx2_env.sh ;;
  *) echo "bench_decode_peers: --isa: '$isa' is not one of: native | avx2" >&2; exit 2 ;;
esac
nmt=${NMT_BUILD_DIR:-build}/nmt
py=$(bench/peers_env.sh --light)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$nmt" export --checkpoint "$checkpoint" --format ctranslate2 --output "$work/ct2"
mkdir -p "$out"
"$py" bench/decode_peers.py "$nmt" "$checkpoint" "$work/ct2" data/real/test.zh data/real/test.en \
  "$out/$report" --threads "$threads" --repeats "$repeats" --lines "$lines" --beams "$beams" --isa "$isa"
