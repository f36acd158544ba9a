#!/usr/bin/env bash
# The runtime as a user meets it: how long one line takes from a cold start
# (the nmt program, the example program on libnmt.so alone, and Python's
# `import nmt`), what a deployment carries (the library's and programs'
# sizes, and every shared library they load), and Python's translate_batch
# against `nmt translate` on the same lines (the decoding phase alone,
# runs interleaved). Writes a Markdown report (docs/bench/runtime.md's
# tables) to stdout.
#
# Usage: bench/bench_runtime.sh [--runs N] [--threads N] [--old BUILD] [--python-site DIR]
#                               [--lines FILE] CHECKPOINT
#   BUILD: an older build folder whose nmt (and tests/example_translate, where built) to time and
#          measure beside build/'s;
#   --python-site: a folder `pip install --target DIR .` filled (default: skip Python);
#   --lines: the throughput input (default data/real/test.zh); defaults: 10 runs, 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10 threads=2 old= site= lines=data/real/test.zh
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --python-site) site=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "bench_runtime: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($# == 1)) || { echo "bench_runtime: give one CHECKPOINT (see --help)" >&2; exit 2; }
checkpoint=$1
[ -e "$checkpoint" ] || { echo "bench_runtime: $checkpoint: no such checkpoint" >&2; exit 2; }
[ -x build/nmt ] && [ -x build/tests/example_translate ] ||
  { echo "bench_runtime: build/nmt and build/tests/example_translate are needed (scripts/test.sh builds them)" >&2; exit 2; }
[ -z "$old" ] || [ -x "$old/nmt" ] || { echo "bench_runtime: $old/nmt: no such program" >&2; exit 2; }
[ -z "$site" ] || [ -d "$site/nmt" ] || { echo "bench_runtime: $site/nmt: no such package" >&2; exit 2; }
python=$(command -v python3)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
line="无法打开文件 %s：权限不够"

# Seconds of wall time for a command, its output discarded.
timed() {
  local start
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || { echo "bench_runtime: failed: $*" >&2; exit 1; }
  echo "$(date +%s.%N) - $start" | bc
}
min_median_max() {  # values on stdin -> "min median max"
  sort -g | awk '{v[NR] = $1} END {print v[1], (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[NR]}'
}
stats() {  # values on stdin -> "min / median / max"
  min_median_max | awk '{printf "%.3f / %.3f / %.3f", $1, $2, $3}'
}

cold=()  # "name|command..."
[ -n "$old" ] && cold+=("nmt translate ($old)|$old/nmt translate --checkpoint $checkpoint --threads $threads")
cold+=("nmt translate (build)|build/nmt translate --checkpoint $checkpoint --threads $threads")
[ -n "$old" ] && [ -x "$old/tests/example_translate" ] &&
  cold+=("examples/translate.cpp ($old)|$old/tests/example_translate $checkpoint")
cold+=("examples/translate.cpp (libnmt.so alone)|build/tests/example_translate $checkpoint")
if [ -n "$site" ]; then
  cat >"$work/one.py" <<PY
import sys
import nmt
t = nmt.Translator(sys.argv[1], threads=$threads)
print(t.translate_batch([sys.stdin.readline().rstrip("\n")])[0].hypotheses[0])
PY
  cold+=("python: import nmt, Translator, translate_batch|env PYTHONPATH=$site $python $work/one.py $checkpoint")
fi
echo "One line from a cold start: $runs runs each, interleaved, wall seconds (min / median / max); $threads threads."
echo
echo "| program | seconds |"
echo "|---|---|"
for i in "${!cold[@]}"; do : >"$work/cold.$i"; done
for ((r = 0; r < runs; ++r)); do
  for i in "${!cold[@]}"; do
    IFS='|' read -r _ cmd <<<"${cold[$i]}"
    # shellcheck disable=SC2086  # the command's words
    timed sh -c "echo '$line' | $cmd" >>"$work/cold.$i"
  done
done
for i in "${!cold[@]}"; do
  IFS='|' read -r name _ <<<"${cold[$i]}"
  echo "| $name | $(stats <"$work/cold.$i") |"
done

echo
echo "What each carries: its own size, and the shared libraries it loads (ldd), in MB."
echo
echo "| file | size MB | stripped MB | shared libraries | their MB |"
echo "|---|---|---|---|---|"
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
carried() {  # file -> one table row
  local libs size stripped
  libs=$(ldd "$1" | awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u)
  size=$(stat -Lc %s "$1")
  strip -o "$work/stripped" "$1" 2>/dev/null && stripped=$(stat -c %s "$work/stripped") || stripped=$size
  echo "| $2 | $(mb "$size") | $(mb "$stripped") | $(grep -c . <<<"$libs") | $(mb "$(xargs -r stat -Lc %s <<<"$libs" | awk '{s += $1} END {print s + 0}')") |"
}
[ -n "$old" ] && carried "$old/nmt" "nmt ($old)"
carried build/nmt "nmt (build)"
carried build/libnmt.so "libnmt.so"
[ -n "$old" ] && [ -x "$old/tests/example_translate" ] && carried "$old/tests/example_translate" "examples/translate.cpp ($old)"
carried build/tests/example_translate "examples/translate.cpp (build)"
[ -n "$site" ] && carried "$(ls "$site"/nmt/_nmt*.so)" "Python's nmt/_nmt module"

if [ -n "$site" ]; then
  echo
  n=$(wc -l <"$lines")
  echo "Python's translate_batch (every line at once) and translate_file (in chunks of 64 batches,"
  echo "as nmt translate reads a file) against nmt translate, the same $n lines ($lines), greedy and"
  echo "beam 4, after the checkpoint is open, sentences/s: median (min-max) of $runs runs, interleaved."
  echo
  echo "| search | nmt translate | translate_batch | / nmt | translate_file | / nmt |"
  echo "|---|---|---|---|---|---|"
  cat >"$work/batch.py" <<PY
import sys, time
import nmt
t = nmt.Translator(sys.argv[1], threads=$threads)
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
start = time.perf_counter()
if sys.argv[4] == "batch":
    t.translate_batch(lines, beam_size=int(sys.argv[3]))
else:
    t.translate_file(sys.argv[2], sys.argv[5], beam_size=int(sys.argv[3]))
print(f"{len(lines) / (time.perf_counter() - start):.1f}")
PY
  for beam in 0 4; do
    : >"$work/cli.$beam"; : >"$work/py.$beam"; : >"$work/file.$beam"
    for ((r = 0; r < runs; ++r)); do
      build/nmt translate --checkpoint "$checkpoint" --threads "$threads" --beam $beam --input "$lines" \
        --output "$work/out.en" 2>"$work/log" || { echo "bench_runtime: nmt translate failed" >&2; exit 1; }
      sed -n 's/.*translated [0-9]* lines in [0-9.]* s (\([0-9.]*\) sentences\/s.*/\1/p' "$work/log" >>"$work/cli.$beam"
      PYTHONPATH=$site "$python" "$work/batch.py" "$checkpoint" "$lines" $beam batch >>"$work/py.$beam"
      PYTHONPATH=$site "$python" "$work/batch.py" "$checkpoint" "$lines" $beam file "$work/py.en" >>"$work/file.$beam"
    done
    cmp -s "$work/out.en" "$work/py.en" || { echo "bench_runtime: Python's translate_file wrote other translations" >&2; exit 1; }
    read -r c_lo c c_hi < <(min_median_max <"$work/cli.$beam")
    read -r p_lo p p_hi < <(min_median_max <"$work/py.$beam")
    read -r f_lo f f_hi < <(min_median_max <"$work/file.$beam")
    echo "| $([ $beam = 0 ] && echo greedy || echo "beam $beam") | $c ($c_lo-$c_hi) |" \
      "$p ($p_lo-$p_hi) | $(echo "scale=3; $p / $c" | bc) |" \
      "$f ($f_lo-$f_hi) | $(echo "scale=3; $f / $c" | bc) |"
  done
fi
