#!/usr/bin/env bash
# The same measurements on two builds of nmt, interleaved, to show whether a
# change that should not move speed (a reorganisation, a refactor) moved it:
# training tokens/s (nmt float32 and bf16, flash attention) on each CONFIG,
# the attention kernels' median time on a fixed set of cases, and with
# --checkpoint the decoding speed of `nmt translate` (sentences/s, greedy,
# beam 4 and beam 5 in float32, bf16 and int8, on --lines; the output of A
# and B must be the same). --decode-only skips training and attention. Runs alternate
# A B B A ... so that a machine that slows down over the run hurts both alike.
# Prints one table: medians per build, B/A, and the spread of each side
# (max/min over its repeats), so that a difference can be read against noise.
#
# Usage: bench/compare_builds.sh [--minutes M] [--repeats R] [--threads N] [--out FILE]
#                                [--checkpoint DIR [--lines FILE] [--decode-only]] BUILD_A BUILD_B [CONFIG ...]
#   BUILD_*: a build folder holding the nmt program (e.g. build, ../old/build)
#   defaults: 1 minute a training run, 2 repeats, 2 threads, configs/toy.yaml configs/real.yaml;
#   --out FILE also writes the table there (Markdown); --lines defaults to
#   the first 500 lines of data/real/test.zh.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=1 repeats=2 threads=2 out= builds=() configs=() checkpoint= lines= decode_only=no
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --checkpoint) checkpoint=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    --decode-only) decode_only=yes; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "compare_builds: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) if ((${#builds[@]} < 2)); then builds+=("$1"); else configs+=("$1"); fi; shift ;;
  esac
done
((${#builds[@]} == 2)) || { echo "compare_builds: give two build folders (see --help)" >&2; exit 2; }
for b in "${builds[@]}"; do
  [ -x "$b/nmt" ] || { echo "compare_builds: $b/nmt: no such program" >&2; exit 2; }
done
((${#configs[@]})) || configs=(configs/toy.yaml configs/real.yaml)
for c in "${configs[@]}"; do [ -f "$c" ] || { echo "compare_builds: $c: no such config" >&2; exit 2; }; done
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "compare_builds: --minutes: '$minutes' is not a number" >&2; exit 2; }
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "compare_builds: --repeats: '$repeats' is not a positive integer" >&2; exit 2; }
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "compare_builds: --threads: '$threads' is not a positive integer" >&2; exit 2; }

[ -z "$checkpoint" ] || [ -e "$checkpoint" ] || { echo "compare_builds: --checkpoint $checkpoint: no such folder" >&2; exit 2; }
[ $decode_only = no ] || [ -n "$checkpoint" ] || { echo "compare_builds: --decode-only needs --checkpoint" >&2; exit 2; }
[ -z "$lines" ] || [ -f "$lines" ] || { echo "compare_builds: --lines $lines: no such file" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "$checkpoint" ] && [ -z "$lines" ]; then
  lines=$work/lines.zh
  head -n 500 data/real/test.zh >"$lines"
fi
rows=$work/rows.csv  # what,build,repeat,value
bf16=yes
grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo || bf16=no

# Build order of repeat r: A B when r is odd, B A when it is even.
order() { if (($1 % 2)); then echo "0 1"; else echo "1 0"; fi; }

train_run() {  # build config precision repeat -> tokens/s over the logged windows after the first
  local dir
  dir=$(mktemp -d -p "$work" train.XXXXXX)
  "$1/nmt" train --config "$2" --attention flash --threads "$threads" --set train.precision="$3" \
    --set train.max_minutes="$minutes" --set train.max_steps=0 --set train.max_epochs=0 \
    --set train.eval_every=1000000000 --set train.valid_bleu_sentences=0 --set train.best_metric=loss \
    --set train.valid_max_sentences=8 --set train.log_every=10 --set train.progress=false \
    --set train.checkpoint_dir="$dir" >"$dir.log" 2>&1 ||
    { echo "compare_builds: $1/nmt train failed, see:" >&2; tail -5 "$dir.log" >&2; exit 1; }
  python3 - "$dir/metrics.jsonl" <<'PY'
import json, sys
w = [json.loads(l) for l in open(sys.argv[1]) if '"window_tokens"' in l][1:]
print(f"{sum(r['window_tokens'] for r in w) / sum(r['window_seconds'] for r in w):.1f}")
PY
  rm -rf "$dir" "$dir.log"
}

decode_run() {  # build beam compute_type tag -> sentences/s (its output kept, to compare A with B)
  local log=$work/decode.$2.$3.log
  "$1/nmt" translate --checkpoint "$checkpoint" --input "$lines" --beam "$2" --compute-type "$3" --threads "$threads" \
    --output "$work/decode.$2.$3.$4.out" 2>"$log" ||
    { echo "compare_builds: $1/nmt translate failed, see:" >&2; tail -5 "$log" >&2; exit 1; }
  sed -n 's/.*translated [0-9]* lines in [0-9.]* s (\([0-9.]*\) sentences\/s.*/\1/p' "$log"
}

attention_run() {  # build case -> median ms
  "$1/nmt" bench-attention --case "$2" --threads "$threads" |
    sed -n 's/^nmt-bench-result ms_median=\([0-9.]*\).*/\1/p'
}

cases=(
  flash:fwd:8:8:512:512:64:0 flash:fwd+bwd:8:8:512:512:64:0 flash:fwd:8:8:2048:2048:64:1
  flash:fwd+bwd:8:8:2048:2048:64:1 flash:fwd:8:8:64:512:64:0 naive:fwd:8:8:512:512:64:0
  naive:fwd+bwd:8:8:512:512:64:0 torch:fwd:8:8:512:512:64:0 torch:fwd+bwd:8:8:512:512:64:0
)
compute_types=(float32 int8)
[ $bf16 = yes ] && compute_types=(float32 bf16 int8)
for ((r = 1; r <= repeats; ++r)); do
  for config in "${configs[@]}"; do
    [ $decode_only = yes ] && break
    for precision in float32 bf16; do
      [ $precision = bf16 ] && [ $bf16 = no ] && continue
      for i in $(order $r); do
        echo "compare_builds: repeat $r/$repeats: train $(basename "$config" .yaml) $precision, ${builds[$i]}" >&2
        echo "train $(basename "$config" .yaml) $precision tokens/s,$i,$r,$(train_run "${builds[$i]}" "$config" $precision $r)" >>"$rows"
      done
    done
  done
  if [ -n "$checkpoint" ]; then
    for type in "${compute_types[@]}"; do
      for beam in 0 4 5; do
        for i in $(order $r); do
          echo "compare_builds: repeat $r/$repeats: translate, $type, beam $beam, ${builds[$i]}" >&2
          echo "translate $type beam $beam sentences/s,$i,$r,$(decode_run "${builds[$i]}" $beam $type "$i$r")" >>"$rows"
        done
      done
    done
  fi
  [ $decode_only = yes ] && continue
  for c in "${cases[@]}"; do
    for i in $(order $r); do
      echo "compare_builds: repeat $r/$repeats: attention $c, ${builds[$i]}" >&2
      ms=$(attention_run "${builds[$i]}" "$c")
      [ -n "$ms" ] || { echo "compare_builds: ${builds[$i]}/nmt bench-attention --case $c printed no result" >&2; exit 1; }
      echo "attention $c ms,$i,$r,$ms" >>"$rows"
    done
  done
done

if [ -n "$checkpoint" ]; then
  for type in "${compute_types[@]}"; do
    for beam in 0 4 5; do
      outs=("$work"/decode.$beam.$type.*.out)
      for f in "${outs[@]}"; do
        cmp -s "$f" "${outs[0]}" || { echo "compare_builds: the builds translate differently ($type, beam $beam): $f" >&2; exit 1; }
      done
    done
  done
fi
python3 - "$rows" "${builds[0]}" "${builds[1]}" "$minutes" "$repeats" "$threads" <<'PY' | tee ${out:+"$out"}
import csv, statistics, sys
rows, a, b, minutes, repeats, threads = sys.argv[1:]
values = {}
for what, build, _, v in csv.reader(open(rows)):
    values.setdefault(what, ([], []))[int(build)].append(float(v))
print(f"A = {a}, B = {b}; {repeats} repeat(s) each, interleaved; {threads} threads; training runs of {minutes} min.")
print("Spread = max/min over one build's repeats. Higher is better for tokens/s, lower for ms.\n")
print("| measure | A median | B median | B/A | spread A | spread B |")
print("|---|---|---|---|---|---|")
for what, (va, vb) in values.items():
    ma, mb = statistics.median(va), statistics.median(vb)
    print(f"| {what} | {ma:.2f} | {mb:.2f} | {mb / ma:.3f} | {max(va) / min(va):.3f} | {max(vb) / min(vb):.3f} |")
PY
