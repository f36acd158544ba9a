#!/usr/bin/env bash
# The decoding settings of a trained model, swept: BLEU on data/real's
# validation split (where decode.* is tuned) and test split, greedy and with
# beam K under GNMT length penalty A, for every K in --beams and A in --lps,
# each checkpoint given. One Markdown table per checkpoint on stdout.
#
# Usage: bench/bench_decode_settings.sh [--beams "4 6"] [--lps "0.6 1.0 1.4"]
#                                       [--splits "valid test"] [--threads T] CHECKPOINT...
#   NMT_BUILD_DIR: the build folder holding nmt (default build)
# Exit 2 on a bad argument, 1 when a decoding fails.
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { echo "bench_decode_settings: $*" >&2; exit 2; }
beams="4 6" lps="0.6 1.0 1.4" splits="valid test" threads=2 checkpoints=()
while (($#)); do
  case $1 in
    --beams|--lps|--splits|--threads)
      (($# >= 2)) || usage "$1 needs a value"
      case $1 in --beams) beams=$2 ;; --lps) lps=$2 ;; --splits) splits=$2 ;; --threads) threads=$2 ;; esac
      shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) usage "unknown option $1 (see --help)" ;;
    *) checkpoints+=("$1"); shift ;;
  esac
done
((${#checkpoints[@]})) || usage "give at least one checkpoint (a run folder or a checkpoint folder)"
for b in $beams; do [[ $b =~ ^[1-9][0-9]*$ ]] || usage "--beams: '$b' is not a whole number"; done
for a in $lps; do [[ $a =~ ^[0-9]+([.][0-9]+)?$ ]] || usage "--lps: '$a' is not a number"; done
for s in $splits; do [ -f "data/real/$s.zh" ] || usage "--splits: no data/real/$s.zh"; done
[[ $threads =~ ^[1-9][0-9]*$ ]] || usage "--threads: '$threads' is not a whole number"
nmt=${NMT_BUILD_DIR:-build}/nmt
[ -x "$nmt" ] || usage "no $nmt (scripts/setup.sh builds it)"

# BLEU of one decoding of data/real/SPLIT with the given flags.
bleu() {
  local split=$1; shift
  "$nmt" evaluate --checkpoint "$ck" --src "data/real/$split.zh" --ref "data/real/$split.en" \
    --threads "$threads" "$@" 2>/dev/null | sed -n 's/^BLEU = \([0-9.]*\).*/\1/p'
}

failed=0
for ck in "${checkpoints[@]}"; do
  echo "### $ck"
  echo
  header="| decoding |" rule="|---|"
  for s in $splits; do header+=" $s BLEU |" rule+="--:|"; done
  echo "$header"; echo "$rule"
  rows=("greedy|--beam 0")
  for b in $beams; do for a in $lps; do rows+=("beam $b, lp $a|--beam $b --length-penalty $a"); done; done
  for row in "${rows[@]}"; do
    line="| ${row%%|*} |"
    for s in $splits; do
      # shellcheck disable=SC2086  # the flags are words by design
      v=$(bleu "$s" ${row#*|})
      [ -n "$v" ] || { v=failed; failed=1; }
      line+=" $v |"
    done
    echo "$line"
  done
  echo
done
exit $failed
