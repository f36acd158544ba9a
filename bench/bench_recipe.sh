#!/usr/bin/env bash
# The recipe table: configs/real.yaml trained under one budget with each of
# bench/recipe_variants.txt's variants (one change at a time against the
# configuration of the round before, then together), one run after the other
# on this machine, each scored on the test split greedy and with beam 4.
#
#   --minutes M   a time budget: train.max_minutes = M (wall time, evaluations
#                 included, as a user's run), max_steps off. Runs are only
#                 comparable on a machine doing nothing else.
#   --steps N     a step budget instead: max_steps = N, max_minutes off (what
#                 M minutes give on a slower or faster machine: 875 steps on
#                 an AVX2-only Zen 3, about 2,200 on AVX-512 with bf16).
#                 Independent of the machine's load.
#   --only LIST   variant names to run (comma-separated; default: all)
#   --threads T   default 2
#   --beam-lp A   beam 4's GNMT length penalty (default 0.6)
#   --out FILE    where the table goes (default docs/bench/recipe.md); rows
#                 are appended under a heading naming the budget, the machine
#                 and the command, so several budgets share one file
#   --keep DIR    keep the run folders there (default: a temporary folder)
#
# Each row: steps taken, training minutes, the best validation BLEU during the
# run, test BLEU of the run folder's checkpoint (what `nmt translate
# --checkpoint RUN` uses) greedy and with beam 4, and the share of the
# source's placeholders kept verbatim (greedy). Exit 2 on a bad argument or
# variant, 1 when a run fails (the row says which).
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { echo "bench_recipe: $*" >&2; exit 2; }
minutes='' steps='' only='' threads=2 lp=0.6 out=docs/bench/recipe.md keep=''
while (($#)); do
  case $1 in
    --minutes|--steps|--only|--threads|--beam-lp|--out|--keep)
      (($# >= 2)) || usage "$1 needs a value"
      case $1 in
        --minutes) minutes=$2 ;; --steps) steps=$2 ;; --only) only=$2 ;; --threads) threads=$2 ;;
        --beam-lp) lp=$2 ;; --out) out=$2 ;; --keep) keep=$2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage "unknown argument $1 (see --help)" ;;
  esac
done
[ -n "$minutes$steps" ] && [ -z "$minutes" -o -z "$steps" ] || usage "give one of --minutes M and --steps N"
[ -z "$minutes" ] || [[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || usage "--minutes: '$minutes' is not a number"
[ -z "$steps" ] || [[ $steps =~ ^[1-9][0-9]*$ ]] || usage "--steps: '$steps' is not a whole number"
[[ $threads =~ ^[1-9][0-9]*$ ]] || usage "--threads: '$threads' is not a whole number"
[[ $lp =~ ^[0-9]+([.][0-9]+)?$ ]] || usage "--beam-lp: '$lp' is not a number"
nmt=${NMT_BUILD_DIR:-build}/nmt
[ -x "$nmt" ] || usage "no $nmt (scripts/setup.sh builds it)"
variants_file=bench/recipe_variants.txt
config=configs/real.yaml

# name -> overrides, from the variants file ("name: --set k=v ...", # comments).
declare -A overrides
names=()
while IFS= read -r line; do
  line=${line%%#*}
  [[ $line =~ ^[[:space:]]*$ ]] && continue
  [[ $line =~ ^([a-z0-9_+-]+):(.*)$ ]] || usage "$variants_file: cannot read '$line'"
  names+=("${BASH_REMATCH[1]}")
  overrides[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done <"$variants_file"
if [ -n "$only" ]; then
  IFS=, read -ra wanted <<<"$only"
  for n in "${wanted[@]}"; do [ -n "${overrides[$n]+x}" ] || usage "--only: no variant '$n' in $variants_file"; done
  names=("${wanted[@]}")
fi

work=${keep:-$(mktemp -d)}
mkdir -p "$work" "$(dirname "$out")"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
# The prepared corpus goes in the work folder: two tables run side by side
# with different tokenizer settings must not prepare one folder in turn.
# Every run reads the config as it was when the table started.
cp "$config" "$work/config.yaml"
config=$work/config.yaml
budget=$([ -n "$minutes" ] && echo "$minutes minutes" || echo "$steps steps")
budget_set=$([ -n "$minutes" ] && echo "--set train.max_minutes=$minutes --set train.max_steps=0" ||
             echo "--set train.max_steps=$steps --set train.max_minutes=0")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
{
  echo
  echo "## $budget a run, $threads threads ($(date -u '+%Y-%m-%d'), $cpu; $("$nmt" --version | sed -n 's/^CPU kernels: //p'))"
  echo
  echo "\`bench/bench_recipe.sh $([ -n "$minutes" ] && echo "--minutes $minutes" || echo "--steps $steps")$([ -n "$only" ] && echo " --only $only") --threads $threads --beam-lp $lp\`"
  echo
  echo "| variant | steps | train min | best valid BLEU | test BLEU greedy | test BLEU beam 4 | placeholders kept |"
  echo "|---|--:|--:|--:|--:|--:|--:|"
} >>"$out"
failed=0
for name in "${names[@]}"; do
  dir=$work/$name
  rm -rf "$dir"
  echo "bench_recipe: $name (${overrides[$name]# })" >&2
  # shellcheck disable=SC2086  # the overrides are words by design
  if ! "$nmt" train --config "$config" --threads "$threads" ${overrides[$name]} $budget_set \
      --set train.checkpoint_dir="$dir" --set data.prepared_dir="$work/prepared" \
      --set train.progress=false >"$work/$name.train.log" 2>&1; then
    echo "| $name | failed: $(tail -1 "$work/$name.train.log" | cut -c1-80) | | | | | |" >>"$out"
    failed=1
    continue
  fi
  read -r st mins < <(sed -n 's/^step: //p; s/^train_seconds: //p' "$dir/last/state.yaml" | paste -sd' ' |
                       awk '{printf "%d %.1f\n", $1, $2 / 60}')
  valid=$(/usr/bin/python3 -c "import json,sys; v=[json.loads(l).get('valid_bleu') for l in open(sys.argv[1])]; v=[x for x in v if x is not None]; print('%.2f' % max(v) if v else '')" "$dir/metrics.jsonl")
  score() {  # extra evaluate flags -> "BLEU|placeholders"
    "$nmt" evaluate --checkpoint "$dir" --src data/real/test.zh --ref data/real/test.en --threads "$threads" "$@" \
      >"$work/$name.eval.txt" 2>"$work/$name.eval.log" || { echo "failed|"; return; }
    echo "$(sed -n 's/^BLEU = \([0-9.]*\).*/\1/p' "$work/$name.eval.txt" | head -1)|$(sed -n 's/.*hypotheses keep \([0-9.]*%\) of the source.s verbatim.*/\1/p' "$work/$name.eval.txt" | head -1)"
  }
  greedy=$(score --beam 0)  # whatever the config's decode.beam says
  beam=$(score --beam 4 --length-penalty "$lp")
  echo "| $name | $st | $mins | $valid | ${greedy%%|*} | ${beam%%|*} | ${greedy#*|} |" >>"$out"
  echo "bench_recipe: $name: $st steps, test BLEU ${greedy%%|*} greedy, ${beam%%|*} beam" >&2
done
exit $failed
