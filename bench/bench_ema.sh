#!/usr/bin/env bash
# What the weights' moving average (train.ema_decay) costs in training speed:
# configs/real.yaml trained for --steps N steps with it off and on, the two
# interleaved --repeats R times so that both see the same machine, each
# run's tokens/s from nmt's own summary line ("N steps in S s of training,
# T tok/s": validation and saving left out), then the medians and on/off.
#
#   --steps N     steps a run (default 60)
#   --repeats R   off/on pairs (default 3)
#   --threads T   default 2
#   --decay D     train.ema_decay of the "on" runs (default 0.999)
#
# Prints a Markdown table (every run, then the medians and the ratio).
# Exit 2 on a bad argument, 1 when a run fails.
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { echo "bench_ema: $*" >&2; exit 2; }
steps=60 repeats=3 threads=2 decay=0.999
while (($#)); do
  case $1 in
    --steps|--repeats|--threads|--decay)
      (($# >= 2)) || usage "$1 needs a value"
      case $1 in --steps) steps=$2 ;; --repeats) repeats=$2 ;; --threads) threads=$2 ;; --decay) decay=$2 ;; esac
      shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage "unknown argument $1 (see --help)" ;;
  esac
done
[[ $steps =~ ^[1-9][0-9]*$ ]] || usage "--steps: '$steps' is not a whole number"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || usage "--repeats: '$repeats' is not a whole number"
[[ $threads =~ ^[1-9][0-9]*$ ]] || usage "--threads: '$threads' is not a whole number"
[[ $decay =~ ^0?[.][0-9]+$ ]] || usage "--decay: '$decay' is not a number in (0, 1)"
nmt=${NMT_BUILD_DIR:-build}/nmt
[ -x "$nmt" ] || usage "no $nmt (scripts/setup.sh builds it)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # label ema_decay -> tokens/s
  "$nmt" train --config configs/real.yaml --threads "$threads" --set train.max_steps="$steps" \
    --set train.max_minutes=0 --set train.eval_every=1000000 --set train.valid_bleu_sentences=0 --set train.best_metric=loss \
    --set train.ema_decay="$2" --set train.checkpoint_dir="$work/$1" --set train.progress=false \
    --overwrite >"$work/$1.log" 2>&1 || { echo "bench_ema: run $1 failed: $(tail -1 "$work/$1.log")" >&2; exit 1; }
  sed -n 's/.* steps in .* s of training, \([0-9.]*\) tok\/s.*/\1/p' "$work/$1.log" | tail -1
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "## train.ema_decay off and $decay: configs/real.yaml, $steps steps a run, $threads threads"
echo "($(date -u '+%Y-%m-%d'), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1))"
echo
echo "| repeat | off tok/s | on tok/s | on / off |"
echo "|--:|--:|--:|--:|"
offs=() ons=()
for r in $(seq "$repeats"); do
  off=$(run "off$r" 0) || exit 1
  on=$(run "on$r" "$decay") || exit 1
  offs+=("$off") ons+=("$on")
  echo "| $r | $off | $on | $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.3f", a / b}') |"
done
moff=$(median "${offs[@]}") mon=$(median "${ons[@]}")
echo "| median | $moff | $mon | $(awk -v a="$mon" -v b="$moff" 'BEGIN {printf "%.3f", a / b}') |"
