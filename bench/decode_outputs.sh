#!/usr/bin/env bash
# Every translation a build makes of a test split, under each decoding
# setting that has its own code path: greedy, beam 4 and beam 5 (length
# penalty 0.6), in float32, bf16 and int8, at batch 32 and batch 1, written
# to OUT/NAME.{greedy,beam4,beam5}.{float32,bf16,int8}.b{32,1}.en. Two
# builds' folders compared with `diff -r` show whether a change that should
# not move a single output (a reorganisation of the decoding code) moved one.
#
# Usage: bench/decode_outputs.sh [--threads N] [--lines N] NMT OUT NAME:CHECKPOINT:SOURCE [...]
#   NMT: the nmt program of the build; OUT: a folder (created);
#   NAME:CHECKPOINT:SOURCE, e.g. toy:checkpoints/toy:data/toy/test.zh;
#   --lines N: the first N lines of each source only (default: all).
# bf16 runs where the CPU has AVX512-BF16 (elsewhere it is float32 widened, a
# path of its own that runs too).
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2 lines=0
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "decode_outputs: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($# >= 3)) || { echo "decode_outputs: give NMT OUT NAME:CHECKPOINT:SOURCE... (see --help)" >&2; exit 2; }
nmt=$1 out=$2
shift 2
[ -x "$nmt" ] || { echo "decode_outputs: $nmt: no such program" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for spec in "$@"; do
  IFS=: read -r name checkpoint source <<<"$spec"
  [ -e "$checkpoint" ] || { echo "decode_outputs: $checkpoint: no such checkpoint" >&2; exit 2; }
  [ -f "$source" ] || { echo "decode_outputs: $source: no such file" >&2; exit 2; }
  input=$source
  if ((lines > 0)); then input=$work/$name.zh; head -n "$lines" "$source" >"$input"; fi
  for search in greedy beam4 beam5; do
    case $search in
      greedy) flags=(--beam 0) ;;
      beam4) flags=(--beam 4 --length-penalty 0.6) ;;
      beam5) flags=(--beam 5 --length-penalty 0.6) ;;
    esac
    for type in float32 bf16 int8; do
      for batch in 32 1; do
        file=$out/$name.$search.$type.b$batch.en
        start=$(date +%s.%N)
        "$nmt" translate --checkpoint "$checkpoint" --input "$input" --output "$file" --threads "$threads" \
          --compute-type "$type" --batch-size "$batch" "${flags[@]}" 2>"$work/log" ||
          { echo "decode_outputs: $name $search $type batch $batch failed: $(tail -1 "$work/log")" >&2; exit 1; }
        printf '%-8s %-7s %-8s batch %-3s %6.1f s  %s\n' "$name" "$search" "$type" "$batch" \
          "$(echo "$(date +%s.%N) - $start" | bc)" "$(md5sum <"$file" | cut -c1-12)"
      done
    done
  done
done
