#!/usr/bin/env bash
# Training speed of nmt against the PyTorch reference script
# (bench/torch_reference.py: same config, data, tokenizer models, batching
# and threads), interleaved in one run so that both see the same machine.
# Prints tokens/s (non-pad source + target tokens per second of training,
# the first logged window left out as warm-up) and the ratios, and writes
# OUT/train.csv (every run) and OUT/train.md (medians and ratios).
#
# Usage: bench/bench_train.sh [--minutes M] [--repeats R] [--threads N] [--out DIR] [CONFIG ...]
#   defaults: 2 minutes a run, 2 repeats, train.threads (0 = all cores),
#   docs/bench, configs/toy.yaml configs/real.yaml
#
# Each repeat runs, in this order: nmt float32, PyTorch float32 as a user
# would run it, PyTorch float32 with the thread settings nmt uses
# (OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4, see
# src/util/thread_env.h), nmt bf16, PyTorch bf16 (torch.autocast). bf16 rows
# are skipped on CPUs without AVX512-BF16/AMX. nmt runs with --attention flash.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=2 repeats=2 threads= out=docs/bench configs=()
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "bench_train: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) configs+=("$1"); shift ;;
  esac
done
((${#configs[@]})) || configs=(configs/toy.yaml configs/real.yaml)
for c in "${configs[@]}"; do [ -f "$c" ] || { echo "bench_train: $c: no such config" >&2; exit 2; }; done
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "bench_train: --minutes: '$minutes' is not a number" >&2; exit 2; }
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "bench_train: --repeats: '$repeats' is not a positive integer" >&2; exit 2; }
python=/usr/bin/python3
$python -c 'import torch, sentencepiece, yaml' 2>/dev/null ||
  { echo "bench_train: $python needs python3-torch, python3-sentencepiece, python3-yaml (apt-get install ...)" >&2; exit 2; }

scripts/setup.sh >/dev/null
nmt=${NMT_BUILD_DIR:-build}/nmt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
csv=$work/train.csv
echo "config,trainer,precision,threads_env,repeat,tokens_per_s,steps,seconds" >"$csv"
thread_flag=()
[ -n "$threads" ] && thread_flag=(--threads "$threads")
bf16=yes
$python -c 'import sys; f=open("/proc/cpuinfo").read(); sys.exit(0 if ("avx512_bf16" in f or "amx_bf16" in f) else 1)' || bf16=no

# nmt: tokens/s over the logged windows after the first.
run_nmt() {  # config precision repeat
  local dir=$work/nmt_$2_$3
  "$nmt" train --config "$1" --attention flash "${thread_flag[@]}" --set train.precision="$2" \
    --set train.max_minutes="$minutes" --set train.max_steps=0 --set train.max_epochs=0 \
    --set train.eval_every=1000000000 --set train.valid_bleu_sentences=0 --set train.best_metric=loss --set train.valid_max_sentences=8 \
    --set train.log_every=10 --set train.progress=false --set train.checkpoint_dir="$dir" \
    >"$dir.log" 2>&1 || { echo "bench_train: nmt failed, see:" >&2; tail -5 "$dir.log" >&2; exit 1; }
  $python - "$dir/metrics.jsonl" <<'PY'
import json, sys
w = [json.loads(l) for l in open(sys.argv[1]) if '"window_tokens"' in l][1:]
tokens, seconds = sum(r["window_tokens"] for r in w), sum(r["window_seconds"] for r in w)
print(f"{tokens / seconds:.1f},{w[-1]['step'] if w else 0},{seconds:.1f}")
PY
}

# The PyTorch script: its RESULT line (first 3 steps left out).
run_torch() {  # config precision env(default|tuned) repeat models_dir
  local log=$work/torch_$2_$3_$4.log envs=(env -u OMP_WAIT_POLICY -u OPENBLAS_THREAD_TIMEOUT)
  [ "$3" = tuned ] && envs=(env OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4)
  local t=()
  [ -n "$threads" ] && t=(--threads "$threads")
  "${envs[@]}" $python bench/torch_reference.py --config "$1" --src-model "$5/src.model" \
    --tgt-model "$5/tgt.model" "${t[@]}" --max-minutes "$minutes" --log-every 10 --precision "$2" \
    >"$log" 2>&1 || { echo "bench_train: torch_reference.py failed, see:" >&2; tail -5 "$log" >&2; exit 1; }
  sed -n 's/^RESULT tokens_per_s=\([0-9.]*\) steps=\([0-9]*\) train_seconds=\([0-9.]*\).*/\1,\2,\3/p' "$log"
}

for config in "${configs[@]}"; do
  name=$(basename "$config" .yaml)
  echo "bench_train: $config: tokenizers" >&2
  "$nmt" train --config "$config" --set train.max_steps=1 --set train.valid_bleu_sentences=0 --set train.best_metric=loss \
    --set train.valid_max_sentences=8 --set train.checkpoint_dir="$work/prep_$name" \
    --set train.progress=false >"$work/prep_$name.log" 2>&1 ||
    { echo "bench_train: $config does not train:" >&2; tail -3 "$work/prep_$name.log" >&2; exit 1; }
  models=$work/prep_$name/tokenizer
  for ((r = 1; r <= repeats; ++r)); do
    for variant in "nmt float32 -" "torch float32 default" "torch float32 tuned" "nmt bf16 -" "torch bf16 default"; do
      read -r trainer precision env <<<"$variant"
      [ "$precision" = bf16 ] && [ $bf16 = no ] && continue
      echo "bench_train: $name repeat $r/$repeats: $trainer $precision ${env/-/}" >&2
      if [ "$trainer" = nmt ]; then
        row=$(run_nmt "$config" "$precision" "$r")
        env=nmt
      else
        row=$(run_torch "$config" "$precision" "$env" "$r" "$models")
      fi
      echo "$name,$trainer,$precision,$env,$r,$row" >>"$csv"
    done
  done
done

cp "$csv" "$out/train.csv"
$python bench/bench_train_summary.py "$out/train.csv" --minutes "$minutes" | tee "$out/train.md"
[ $bf16 = no ] && echo "(this CPU has neither AVX512-BF16 nor AMX-BF16: bf16 rows skipped)"
exit 0
