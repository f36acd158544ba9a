#!/usr/bin/env bash
# Training speed of nmt against PyTorch running the same recipe
# (bench/torch_reference.py: same config, data, tokenizer models, batching
# rule, model shape, init scale, optimizer, schedule, dropout, label smoothing
# and threads), interleaved in one run so that all see the same machine.
# Prints tokens/s (non-pad source + target tokens per second of training,
# warm-up left out) and the ratios, and writes OUT/train.csv (every run) and
# OUT/train.md (medians and ratios).
#
# Usage: bench/bench_train.sh [--minutes M] [--repeats R] [--threads N] [--isa native|avx2] [--only LIST]
#                             [--out DIR] [CONFIG ...]
#   defaults: 2 minutes a run, 2 repeats, train.threads (0 = all cores),
#   every variant, docs/bench, configs/toy.yaml configs/real.yaml
#   --only: the variants to run, comma-separated, from: nmt-float32,
#   nmt-bf16, torch2.15-float32-default, torch2.15-float32-tuned,
#   torch2.15-bf16-default, torch2.15-bf16-tuned, torch2.15-compile-float32,
#   torch2.15-compile-bf16, torch1.13-float32; e.g. one pair alternated
#   many times (--only nmt-float32,torch2.15-float32-default --repeats 5),
#   whose per-repeat ratios show how much the machine drifts
#   --isa avx2: every trainer held to its AVX2 kernels on an AVX-512 CPU, as
#   an AVX2-only machine runs them (bench/avx2_env.sh); no bf16 rows; writes
#   train_avx2.*
#
# Each repeat runs, in this order:
#   nmt float32, nmt bf16 (--attention flash);
#   PyTorch 2.15 (bench/peers_env.sh's venv, made if missing): eager float32
#   and eager bf16 (torch.autocast), each as a user would start it and tuned;
#   torch.compile float32 and bf16 as started (the tuned settings made eager
#   float32 slower on configs/toy.yaml, 17.6k against 26.7k tokens/s, so the
#   compiled runs go without them);
#   PyTorch 1.13 (Debian's python3-torch) eager float32, tuned.
# "Tuned" is what a competent user sets on a CPU: OMP_WAIT_POLICY=PASSIVE
# (no spinning threads between ops), jemalloc (LD_PRELOAD) when installed,
# the OPENBLAS_CORETYPE nmt names where OpenBLAS picks generic kernels,
# and the fused Adam the script picks on PyTorch >= 2.4. Compiled runs leave
# out their first 10 steps (compilation) instead of 3. bf16 rows are skipped
# on CPUs without AVX512-BF16/AMX.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=2 repeats=2 threads= isa=native only= out=docs/bench configs=()
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --isa) isa=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=$2; [ -n "$only" ] || { echo "bench_train: --only: empty list (see --help)" >&2; exit 2; }; shift 2 ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    -*) echo "bench_train: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) configs+=("$1"); shift ;;
  esac
done
((${#configs[@]})) || configs=(configs/toy.yaml configs/real.yaml)
for c in "${configs[@]}"; do [ -f "$c" ] || { echo "bench_train: $c: no such config" >&2; exit 2; }; done
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "bench_train: --minutes: '$minutes' is not a number" >&2; exit 2; }
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "bench_train: --repeats: '$repeats' is not a positive integer" >&2; exit 2; }
# Every variant a repeat runs, in order: trainer, precision, environment.
variants=("nmt float32 nmt" "nmt bf16 nmt" "torch2.15 float32 default" "torch2.15 float32 tuned"
          "torch2.15 bf16 default" "torch2.15 bf16 tuned" "torch2.15-compile float32 default"
          "torch2.15-compile bf16 default" "torch1.13 float32 tuned")
variant_key() {  # "trainer precision env" -> the name --only takes
  local t p e; read -r t p e <<<"$1"
  case $t in nmt|torch1.13|torch2.15-compile) echo "$t-$p" ;; *) echo "$t-$p-$e" ;; esac
}
if [ -n "$only" ]; then
  keys=" "; for v in "${variants[@]}"; do keys+="$(variant_key "$v") "; done
  IFS=, read -ra wanted <<<"$only"
  for w in "${wanted[@]}"; do
    [[ $keys == *" $w "* ]] || { echo "bench_train: --only: '$w' is not one of:$keys" >&2; exit 2; }
  done
  chosen=()
  for v in "${variants[@]}"; do [[ ",$only," == *",$(variant_key "$v"),"* ]] && chosen+=("$v"); done
  variants=("${chosen[@]}")
fi
case $isa in
  native) report=train ;;
  avx2) report=train_avx2; source bench/avx2_env.sh ;;
  *) echo "bench_train: --isa: '$isa' is not one of: native | avx2" >&2; exit 2 ;;
esac
source bench/train_peers.sh
python=/usr/bin/python3
$python -c 'import torch, sentencepiece, yaml' 2>/dev/null ||
  { echo "bench_train: $python needs python3-torch, python3-sentencepiece, python3-yaml (apt-get install ...)" >&2; exit 2; }
peer_python=$(bench/peers_env.sh)
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -f $jemalloc ] || jemalloc=

scripts/setup.sh >/dev/null
nmt=${NMT_BUILD_DIR:-build}/nmt
# Where OpenBLAS falls back to generic kernels on this CPU and nmt names the
# fitting ones (docs/training.md, "Training speed"), the tuned runs of
# Debian's PyTorch (on the same OpenBLAS) get the same kernels.
blas_core=$("$nmt" --version | sed -n 's/^BLAS: OpenBLAS [^,]*, \([A-Za-z0-9_]*\) kernels (set by nmt.*/\1/p')
[ "$isa" = avx2 ] && blas_core=$OPENBLAS_CORETYPE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
csv=$work/train.csv
echo "config,trainer,precision,threads_env,repeat,tokens_per_s,steps,seconds" >"$csv"
thread_flag=()
[ -n "$threads" ] && thread_flag=(--threads "$threads")
bf16=yes
$python -c 'import sys; f=open("/proc/cpuinfo").read(); sys.exit(0 if ("avx512_bf16" in f or "amx_bf16" in f) else 1)' || bf16=no
[ "$isa" = avx2 ] && bf16=no

# nmt: tokens/s over its steps after the first 3 (a window is logged every
# step; PyTorch's script leaves out the same 3 warm-up steps).
run_nmt() {  # config precision repeat
  local dir=$work/nmt_$(basename "$1" .yaml)_$2_$3
  "$nmt" train --config "$1" --attention flash "${thread_flag[@]}" --set train.precision="$2" \
    --set train.max_minutes="$minutes" --set train.max_steps=0 --set train.max_epochs=0 \
    --set train.eval_every=1000000000 --set train.valid_bleu_sentences=0 --set train.best_metric=loss --set train.valid_max_sentences=8 \
    --set train.log_every=1 --set train.progress=false --set train.checkpoint_dir="$dir" \
    >"$dir.log" 2>&1 || { echo "bench_train: nmt failed, see:" >&2; tail -5 "$dir.log" >&2; exit 1; }
  $python - "$dir/metrics.jsonl" <<'PY'
import json, sys
w = [r for r in (json.loads(l) for l in open(sys.argv[1]) if '"window_tokens"' in l) if r["step"] > 3]
tokens, seconds = sum(r["window_tokens"] for r in w), sum(r["window_seconds"] for r in w)
if not w: print("bench_train: nmt logged no step after its first 3 (too short a run?)", file=sys.stderr)
print(f"{tokens / seconds:.1f},{w[-1]['step']},{seconds:.1f}" if w else "nan,0,0")
PY
}

# The PyTorch script: its RESULT line.
run_torch() {  # config precision env(default|tuned) repeat models_dir python compile(yes|no)
  local log=$work/torch_$(basename "$1" .yaml)_$2_$3_$4_$(basename "$(dirname "$(dirname "$6")")")_$7.log
  local envs=("${torch_as_started[@]}")
  [ "$3" = tuned ] && envs=(env OMP_WAIT_POLICY=PASSIVE ${jemalloc:+LD_PRELOAD=$jemalloc} ${blas_core:+OPENBLAS_CORETYPE=$blas_core})
  local t=() c=(--warmup-steps-excluded 3)
  [ -n "$threads" ] && t=(--threads "$threads")
  [ "$7" = yes ] && c=(--compile --warmup-steps-excluded 10)
  "${envs[@]}" "$6" bench/torch_reference.py --config "$1" --src-model "$5/src.model" \
    --tgt-model "$5/tgt.model" "${t[@]}" "${c[@]}" --max-minutes "$minutes" --log-every 10 --precision "$2" \
    >"$log" 2>&1 || { echo "bench_train: torch_reference.py failed, see:" >&2; tail -5 "$log" >&2; return 1; }
  local row
  row=$(sed -n 's/^RESULT tokens_per_s=\([0-9.]*\) steps=\([0-9]*\) train_seconds=\([0-9.]*\).*/\1,\2,\3/p' "$log")
  # (a run too short to get past its warm-up steps reports no RESULT)
  [ -n "$row" ] || { echo "bench_train: no RESULT line in $log (too few steps after the warm-up?)" >&2; return 1; }
  echo "$row"
}

for config in "${configs[@]}"; do
  name=$(basename "$config" .yaml)
  echo "bench_train: $config: tokenizers" >&2
  models=$(tokenizer_models "$nmt" "$config" "$work/prep_$name" bench_train)
  for ((r = 1; r <= repeats; ++r)); do
    for variant in "${variants[@]}"; do
      read -r trainer precision env <<<"$variant"
      [ "$precision" = bf16 ] && [ $bf16 = no ] && continue
      echo "bench_train: $name repeat $r/$repeats: $trainer $precision $env" >&2
      case $trainer in
        nmt) row=$(run_nmt "$config" "$precision" "$r") ;;
        torch2.15) row=$(run_torch "$config" "$precision" "$env" "$r" "$models" "$peer_python" no) || row="nan,0,0" ;;
        torch2.15-compile) row=$(run_torch "$config" "$precision" "$env" "$r" "$models" "$peer_python" yes) || row="nan,0,0" ;;
        torch1.13) row=$(run_torch "$config" "$precision" "$env" "$r" "$models" "$python" no) || row="nan,0,0" ;;
      esac
      echo "$name,$trainer,$precision,$env,$r,$row" >>"$csv"
    done
  done
done

cp "$csv" "$out/$report.csv"
{
  $python bench/bench_train_summary.py "$out/$report.csv" --minutes "$minutes"
  echo
  echo "Peers: $("$peer_python" -c 'import torch; print("PyTorch", torch.__version__)') (bench/peers-requirements.txt) and"
  echo "$($python -c 'import torch; print("PyTorch", torch.__version__)') (Debian python3-torch); tuned: OMP_WAIT_POLICY=PASSIVE${jemalloc:+, LD_PRELOAD=$jemalloc}${blas_core:+, OPENBLAS_CORETYPE=$blas_core},"
  echo "fused Adam on 2.15; threads ${threads:-from train.threads}. CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores."
  [ "$isa" = avx2 ] && echo "Every trainer held to its AVX2 kernels ($AVX2_SETTINGS): what an AVX2-only CPU runs, no bf16."
  echo "Command: bench/bench_train.sh --minutes $minutes --repeats $repeats${threads:+ --threads $threads}$([ "$isa" = avx2 ] && echo " --isa avx2")${only:+ --only $only} ${configs[*]}"
} | tee "$out/$report.md"
[ $bf16 = no ] && [ "$isa" = native ] && echo "(this CPU has neither AVX512-BF16 nor AMX-BF16: bf16 rows skipped)"
exit 0
