#!/usr/bin/env bash
# nmt against PyTorch on one NVIDIA GPU (H100, H200), time-boxed to fit a
# 15-minute loan of a GPU: 351 s on an H100 with --train-minutes 0.5 (its
# report ends with each section's seconds; docs/bench/gpu_h100.md), about
# 7 minutes with the defaults, never more than --time-limit. One report
# (Markdown) gets each command, its exit code and the last lines of its
# output, then the tables:
#   1. build and device: nmt --version, nvidia-smi, PY's PyTorch and its GPU
#      (about 10 s)
#   2. correctness: nmt_tests' CUDA cases and tests/flash_standalone_test; a
#      CUDA case skipped counts as a failure (about 1 minute)
#   3. attention: nmt bench-attention --backends torch,flash with float32 and
#      with bf16 inputs, B = 8, H = 8, T = 1024 and 4096 and the 64x512 cross
#      case, head dims 64 and 128, forward and forward+backward, causal and
#      not: flash against LibTorch's SDPA (the torch backend, with the kernel
#      SDPA chose) with the speed ratio; with bf16 also against SDPA allowed
#      only its FlashAttention-2 kernel (--sdpa flash); 37 processes per dtype,
#      18 more for the FA2 rows (about 2 minutes)
#   4. training, for each of --configs (configs/real.yaml, 8.6M parameters,
#      and configs/base.yaml, Transformer-base) for M minutes a run, each in
#      its own folder: nmt float32 and nmt bf16 (flash attention), then
#      bench/torch_reference.py on the same GPU with nmt's tokenizers, bf16
#      autocast eager (nn.MultiheadAttention, i.e. SDPA) and torch.compile'd;
#      the validation BLEU of each, all scored by nmt; one table a config of
#      tokens/s, steps, BLEU and tokens/s against nmt bf16, with nmt bf16
#      against nmt float32 and against PyTorch's fastest mode (about 4 x M
#      minutes a config plus start-ups, decoding and compilation). With
#      --baseline, nmt again on the first config with its fused CUDA
#      training ops off (NMT_CUDA_FUSED_OPS=0: LibTorch's composite ops, as
#      before they existed), so the table shows what they change; with
#      --profile-steps N, `nmt train --profile N` of the first config in
#      float32 and bf16 (and, with --baseline, unfused): host time per op
#      and the step's time without the profiler
#
# Usage: bench/bench_gpu.sh [--build-dir DIR] [--report FILE] [--train-minutes M]
#          [--time-limit T] [--python PY] [--bench-lens LIST] [--bench-dims LIST]
#          [--configs LIST] [--attention-dtypes LIST] [--baseline] [--profile-steps N]
#          [--pytorch-modes LIST] [--skip-standalone] [--skip-tests] [--dry-run]
#   --build-dir DIR    a CUDA build (scripts/build_cuda.sh) or a bundle from
#                      scripts/gpu_bundle_build.sh (source DIR/env.sh PY first);
#                      default build-cuda
#   --report FILE      default gpu_bench_report.md
#   --train-minutes M  per training run, fractions allowed; default 0.75. The
#                      compiled PyTorch run's minutes start after its 10
#                      warm-up steps, so compilation comes on top
#   --time-limit T     minutes for the whole run, default 9: a command still
#                      running then is stopped (and named in the summary)
#   --python PY        python with CUDA PyTorch, sentencepiece and yaml;
#                      default python3
#   --bench-lens LIST, --bench-dims LIST  default 1024,4096 and 64,128
#   --configs LIST     names under configs/, default real,base
#   --attention-dtypes LIST  float32,bf16 (the default), one of them, or none
#   --baseline         the first config also with the fused CUDA ops off
#   --profile-steps N  profile N steps of the first config (default 0: none)
#   --skip-standalone  leave out tests/flash_standalone_test (the kernels
#                      alone, 28 cases: for a run whose kernels did not change)
#   --pytorch-modes LIST  eager,compile (the default), one of them, or none
#   --skip-tests       leave out the correctness section altogether (a second
#                      run on the same build: these flags split one
#                      benchmark over two loans)
#   --dry-run          no GPU needed: the same steps on the CPU with tiny sizes
#                      (bench-attention at T = 64, D = 16, float32 only;
#                      configs/toy.yaml (whatever --configs says) for 12
#                      steps a run; 100 validation
#                      lines; the CUDA tests and torch.compile skipped), in
#                      well under 2 minutes on 2 cores; ctest bench.gpu_dry_run
#                      runs it. Without torch in PY its PyTorch rows say
#                      "skipped: no torch"
# Relative paths are taken from the directory it is started in; it runs from
# the repository (configs/, data/real/, bench/torch_reference.py).
# Exit 0 when everything ran, 1 when a check failed (the report says which),
# 2 on a bad argument, and (without --dry-run) when there is no GPU.
set -uo pipefail
start_dir=$PWD
usage_error() { echo "bench_gpu: $*" >&2; exit 2; }
build='' report=gpu_bench_report.md minutes=0.75 time_limit=9 py=python3 lens='' dims='' dry=0
configs=real,base attention_dtypes=float32,bf16 pytorch_modes=eager,compile baseline=0 profile_steps=0
standalone=1 tests=1
while (($#)); do
  case $1 in
    --build-dir|--report|--train-minutes|--time-limit|--python|--bench-lens|--bench-dims|--configs|\
    --attention-dtypes|--profile-steps|--pytorch-modes)
      (($# >= 2)) || usage_error "$1 needs a value (see --help)"
      case $1 in
        --configs) configs=$2 ;;
        --attention-dtypes) attention_dtypes=$2 ;;
        --profile-steps) profile_steps=$2 ;;
        --pytorch-modes) pytorch_modes=$2 ;;
        --build-dir) build=$2 ;;
        --report) report=$2 ;;
        --train-minutes) minutes=$2 ;;
        --time-limit) time_limit=$2 ;;
        --python) py=$2 ;;
        --bench-lens) lens=$2 ;;
        --bench-dims) dims=$2 ;;
      esac
      shift 2 ;;
    --dry-run) dry=1; shift ;;
    --baseline) baseline=1; shift ;;
    --skip-standalone) standalone=0; shift ;;
    --skip-tests) tests=0; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument $1 (see --help)" ;;
  esac
done
positive() { [[ $1 =~ ^[0-9]*[.]?[0-9]+$ ]] && awk -v m="$1" 'BEGIN { exit !(m > 0) }'; }
positive "$minutes" || usage_error "--train-minutes: '$minutes' is not a positive number"
positive "$time_limit" || usage_error "--time-limit: '$time_limit' is not a positive number"
for v in "--bench-lens=$lens" "--bench-dims=$dims"; do
  [[ $v =~ =$ || $v =~ =[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
    usage_error "${v%%=*}: '${v#*=}' is not a comma-separated list of numbers"
done
[[ $configs =~ ^[a-z0-9_]+(,[a-z0-9_]+)*$ ]] || usage_error "--configs: '$configs' is not a comma-separated list of names"
IFS=, read -ra config_names <<<"$configs"
for c in "${config_names[@]}"; do
  [ -f "$(dirname "$0")/../configs/$c.yaml" ] || usage_error "--configs: no configs/$c.yaml"
done
[[ $attention_dtypes =~ ^((float32|bf16)(,(float32|bf16))*|none)$ ]] ||
  usage_error "--attention-dtypes: '$attention_dtypes' is not a list of float32 and bf16, or none"
[[ $pytorch_modes =~ ^((eager|compile)(,(eager|compile))*|none)$ ]] ||
  usage_error "--pytorch-modes: '$pytorch_modes' is not a list of eager and compile, or none"
[[ $profile_steps =~ ^[0-9]+$ ]] || usage_error "--profile-steps: '$profile_steps' is not a whole number"
abs() { case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$start_dir" "$1" ;; esac; }
report=$(abs "$report")
[ -n "$build" ] && build=$(abs "$build")
case $py in */*) py=$(abs "$py") ;; esac
command -v "$py" >/dev/null || usage_error "--python: $py: not found"
cd "$(dirname "$0")/.." || exit 2
build=${build:-$PWD/build-cuda}
nmt=$build/nmt
[ -x "$nmt" ] || usage_error "no $nmt (build with scripts/build_cuda.sh, or give a bundle's folder)"
if ((!dry)); then
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    usage_error "no NVIDIA GPU here (nvidia-smi -L fails); --dry-run runs on the CPU"
  fi
fi
: >"$report" 2>/dev/null || usage_error "--report: cannot write $report"

# What differs between the GPU run and the dry run (which ignores --train-minutes).
if ((dry)); then
  device=cpu config_names=(toy) threads=(--threads 2) lens=${lens:-64} dims=${dims:-16}
  dtypes=(float32) bench_extra=(--repeats 1 --threads 2)
  budget="12 steps" nmt_rule="12 steps (\`train.max_steps\`)" py_rule="12 steps"
  nmt_budget=(--set train.max_steps=12 --set train.max_minutes=0 --set train.log_every=4)
  py_budget=(--max-steps 12 --log-every 4)
  train_limit=300 compile_limit=300
  # The baseline and profile code paths once each (the CPU has no fused CUDA ops to compare).
  baseline_precs=(float32) profile_precs=(float32)
else
  device=cuda threads=() lens=${lens:-1024,4096} dims=${dims:-64,128}
  IFS=, read -ra dtypes <<<"${attention_dtypes/none/}"
  bench_extra=()
  budget="$minutes min" nmt_rule="$minutes minutes of wall time (\`train.max_minutes\`)"
  py_rule="$minutes minutes of training steps"
  nmt_budget=(--set train.max_minutes="$minutes" --set train.max_steps=0)
  py_budget=(--max-minutes "$minutes")
  # Time limits: the budget plus start-up, corpus preparation and decoding
  # (compilation, for torch.compile).
  seconds=$(awk -v m="$minutes" 'BEGIN { print int(m * 60) }')
  train_limit=$((seconds + 180)) compile_limit=$((seconds + 420))
  baseline_precs=(float32 bf16) profile_precs=(float32 bf16)
fi

# Python runs without a bundle's lib/ and lib-cxx/ (Debian's libraries, for
# nmt, that BUNDLE/env.sh puts on LD_LIBRARY_PATH): PyTorch as the host has it.
py_ld=''
IFS=: read -ra ld_dirs <<<"${LD_LIBRARY_PATH:-}"
for d in "${ld_dirs[@]}"; do
  case $(realpath -m "$d") in "$(realpath -m "$build")"/lib|"$(realpath -m "$build")"/lib-cxx) continue ;; esac
  py_ld=${py_ld:+$py_ld:}$d
done
pyq() { LD_LIBRARY_PATH=$py_ld "$py" "$@"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=() times=() section_name='' section_start=$SECONDS
deadline=$(awk -v m="$time_limit" -v s="$SECONDS" 'BEGIN { print s + int(m * 60) }')
section() {
  [ -n "$section_name" ] && times+=("$section_name|$((SECONDS - section_start))")
  section_name=$1 section_start=$SECONDS
  printf '\n## %s\n\n' "$1" >>"$report"
  echo "bench_gpu: $1" >&2
}
note() { printf '%s\n\n' "$*" >>"$report"; }
# record NAME COMMAND...: runs it (killed after LIMIT seconds, default 600;
# with PY=1, under python's LD_LIBRARY_PATH), its output in $log; appends the command line, exit code and last TAIL lines
# (default 40) to the report; a failure is named in the summary.
# Never past --time-limit: a command gets at most the time left, and none
# starts with less than 10 s left.
record() {
  local name=$1 rc=0 limit=${LIMIT:-600} left=$((deadline - SECONDS)) why
  shift
  log=$work/$name.log
  why="killed after $limit s"
  ((left < limit)) && limit=$left why="killed after $left s: the run's --time-limit"
  if ((limit < 10)); then
    : >"$log"
    note "\`$*\`: not run, --time-limit ($time_limit min) reached."
    failed+=("$name (not run: --time-limit)")
    return 1
  fi
  (
    if ((${PY:-0})); then export LD_LIBRARY_PATH=$py_ld; fi
    exec timeout -k 10 "$limit" "$@"
  ) >"$log" 2>&1 || rc=$?
  {
    echo "\`$*\` (exit $rc$( ((rc == 124 || rc == 137)) && echo ", $why"))"
    echo; echo '```'; tail -n "${TAIL:-40}" "$log"; echo '```'; echo
  } >>"$report"
  ((rc == 0)) || failed+=("$name")
  return $rc
}
config_value() { sed -n "s/^ *$1: *\([^ #]*\).*/\1/p" "$config" | head -1; }

{
  echo "# nmt against PyTorch on a GPU: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  if ((dry)); then
    echo "**Dry run** (\`--dry-run\`): the CPU, tiny sizes; the figures say only that every step runs."
    echo
  fi
  echo "Build \`$build\`, python \`$py\`, configs ${config_names[*]}, $budget per training run; attention at T = $lens, D = $dims."
} >>"$report"

section "Build and device"
TAIL=10 record version "$nmt" --version
if ((dry)); then
  note "nvidia-smi: skipped (dry run)."
else
  record nvidia-smi nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
fi
torch_ok=1 has_compile=0 torch_version=''
if pyq -c 'import torch, sentencepiece, yaml; print(torch.__version__, int(hasattr(torch, "compile")))' \
    >"$work/py_check.txt" 2>&1; then
  read -r torch_version has_compile <"$work/py_check.txt"
  PY=1 TAIL=5 record pytorch "$py" -c 'import sys, torch; ok = torch.cuda.is_available(); print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "device:", torch.cuda.get_device_name(0) if ok else "none"); sys.exit(sys.argv[1] == "cuda" and not ok)' "$device"
else
  torch_ok=0
  why=$(tail -n 1 "$work/py_check.txt")
  note "PyTorch: $py cannot import torch, sentencepiece and yaml ($why): the PyTorch rows are skipped."
  ((dry)) || failed+=("pytorch (no torch, sentencepiece or yaml in $py)")
fi

section "Correctness"
if ((!tests)); then
  note "Left out (--skip-tests)."
elif ((dry)); then
  note "Skipped: dry run, no GPU (nmt_tests' CUDA cases and tests/flash_standalone_test need one)."
else
  # A case skipped because CUDA or our kernels are missing counts as a failure.
  LIMIT=300 TAIL=25 record gtest-cuda "$build/tests/nmt_tests" --gtest_filter='*cuda*:*Cuda*:*CUDA*'
  grep -q -e 'CUDA is not available' -e 'no CUDA attention kernels' "$log" &&
    failed+=("gtest-cuda skipped cases")
  if ((standalone)); then
    LIMIT=300 TAIL=25 record flash-standalone "$build/tests/flash_standalone_test"
  else
    note "tests/flash_standalone_test: left out (--skip-standalone)."
  fi
fi

for dtype in float32 bf16; do
  section "Attention, $dtype inputs: flash against SDPA (the torch backend)"
  if [[ " ${dtypes[*]} " != *" $dtype "* ]]; then
    if ((dry)); then
      note "Skipped: dry run (nmt's CPU attention kernels have no bf16; the GPU run times it)."
    else
      note "Left out (--attention-dtypes $attention_dtypes)."
    fi
    continue
  fi
  csv=$work/attention_$dtype.csv
  LIMIT=360 TAIL=60 record "bench-attention-$dtype" "$nmt" bench-attention --device "$device" --dtype "$dtype" \
    --backends torch,flash --lens "$lens" --head-dims "$dims" "${bench_extra[@]}" --csv "$csv"
  [ -f "$csv" ] || continue
  # SDPA picks its kernel itself (on Hopper it prefers cuDNN's); its
  # FlashAttention-2 kernel, the usual peer of a flash kernel, takes only
  # 16-bit inputs, so the bf16 run also times SDPA restricted to it.
  flash_csv=''
  if [ "$dtype" = bf16 ]; then
    flash_csv=$work/attention_${dtype}_sdpa_flash.csv
    LIMIT=240 TAIL=25 record "bench-attention-$dtype-sdpa-flash" "$nmt" bench-attention --device "$device" \
      --dtype "$dtype" --backends torch --sdpa flash --lens "$lens" --head-dims "$dims" "${bench_extra[@]}" \
      --csv "$flash_csv"
  fi
  pyq - "$csv" "$flash_csv" >>"$report" <<'EOF'
import csv, os, sys
rows = list(csv.DictReader(open(sys.argv[1])))
key = lambda r: (r["pass"], r["batch"], r["heads"], r["q_len"], r["k_len"], r["head_dim"], r["causal"])
sdpa = {key(r): r for r in rows if r["backend"] == "torch" and r["ms_median"]}
fa2 = {}
if sys.argv[2] and os.path.exists(sys.argv[2]):
    fa2 = {key(r): r for r in csv.DictReader(open(sys.argv[2])) if r["ms_median"]}
kernels = sorted({r.get("kernel") or "?" for r in sdpa.values()})
print("B = 8, H = 8 (the cross case: Tq = 64, Tk = 512); median ms; speed = SDPA ms / flash ms "
      "(above 1: flash is faster); TFLOP/s count 4·B·H·Tq·Tk·D per forward, half when causal, "
      "3.5 times that for forward+backward. SDPA is LibTorch's own choice of kernel (the `kernel` "
      f"column; here: {', '.join(kernels)})" + ("; SDPA-FA2 is SDPA allowed only its FlashAttention-2 "
      "kernel (`--sdpa flash`)." if fa2 else ".") + "\n")
extra_h = " SDPA-FA2 ms | flash / SDPA-FA2 speed |" if fa2 else ""
print("| pass | Tq | Tk | D | causal | flash ms | SDPA ms | SDPA kernel | flash / SDPA speed |" + extra_h +
      " flash TFLOP/s | SDPA TFLOP/s | flash peak MB | SDPA peak MB |")
print("|---|--:|--:|--:|--:|--:|--:|---|--:|" + ("--:|--:|" if fa2 else "") + "--:|--:|--:|--:|")
for r in rows:
    t = sdpa.get(key(r))
    if r["backend"] != "flash" or not t or not r["ms_median"]:
        continue
    f_ms, t_ms = float(r["ms_median"]), float(t["ms_median"])
    extra = ""
    if fa2:
        a = fa2.get(key(r))
        extra = f" {float(a['ms_median']):.3f} | {float(a['ms_median']) / f_ms:.2f} |" if a else " failed | |"
    print(f"| {r['pass']} | {r['q_len']} | {r['k_len']} | {r['head_dim']} | {r['causal']} | {f_ms:.3f} | {t_ms:.3f} "
          f"| {t.get('kernel', '')} | {t_ms / f_ms:.2f} |{extra} {float(r['gflops']) / 1e3:.2f} | {float(t['gflops']) / 1e3:.2f} "
          f"| {r['peak_mb']} | {t['peak_mb']} |")
print()
EOF
done

row() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$rows"; }  # run, tokens/s, steps, seconds, BLEU, note
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$result"; }  # of the RESULT line
bleu_in() { sed -n 's/^BLEU = \([0-9.]*\).*/\1/p' "$1" | head -1; }
fast_bf16=1
((dry)) && ! "$nmt" --version 2>/dev/null | grep -q ', fast bf16' && fast_bf16=0

# nmt_run NAME PREC FUSED: one nmt training run of $config, its row (FUSED=0:
# NMT_CUDA_FUSED_OPS=0, the LibTorch composites).
nmt_run() {
  local name=$1 prec=$2 fused=$3 dir stats
  if [ "$prec" = bf16 ] && ((!fast_bf16)); then
    note "$name: skipped (this CPU has neither AVX512-BF16 nor AMX, and nmt refuses bf16 on it)."
    row "$name" "" "" "" "" "skipped: no bf16 on this CPU"
    return
  fi
  dir=$work/${config_name}_nmt_${prec}_$fused
  LIMIT=$train_limit TAIL=6 record "train-${config_name}-nmt-$prec$( ((fused)) || echo -unfused)" \
    env NMT_CUDA_FUSED_OPS="$fused" "$nmt" train --config "$config" --device "$device" \
    "${threads[@]}" --attention flash --set train.precision="$prec" --set train.checkpoint_dir="$dir" \
    --set tokenizer.protect_placeholders=false \
    --set data.prepared_dir="$work/prepared" "${nmt_budget[@]}" --set train.eval_every=1000000 \
    --set train.valid_bleu_sentences=0 --set train.best_metric=loss --set train.progress=false
  if [ ! -f "$dir/last/state.yaml" ]; then
    row "$name" "" "" "" "" "failed: no checkpoint"
    return
  fi
  stats=$(pyq - "$dir" <<'EOF2'
import json, sys
d = sys.argv[1]
w = [r for r in map(json.loads, filter(str.strip, open(f"{d}/metrics.jsonl"))) if "window_tokens" in r]
w = w[1:] or w
tok = sum(r["window_tokens"] for r in w) / sum(r["window_seconds"] for r in w) if w else float("nan")
st = dict(l.split(": ", 1) for l in open(f"{d}/last/state.yaml").read().splitlines() if ": " in l)
print(f"{tok:.0f}\t{st['step']}\t{float(st['train_seconds']):.1f}")
EOF2
  )
  LIMIT=300 TAIL=4 record "evaluate-${config_name}-nmt-$prec-$fused" "$nmt" evaluate --checkpoint "$dir/last" \
    --src "$valid_src" --ref "$valid_ref" --device "$device" "${threads[@]}"
  row "$name" "$(cut -f1 <<<"$stats")" "$(cut -f2 <<<"$stats")" "$(cut -f3 <<<"$stats")" "$(bleu_in "$log")" \
    "$( ((fused)) || echo "fused CUDA ops off (NMT_CUDA_FUSED_OPS=0)")"
}

first_config=1
for config_name in "${config_names[@]}"; do
  config=configs/$config_name.yaml
  section "Training $config, $budget per run"
  valid_src=$(config_value valid_src) valid_ref=$(config_value valid_tgt)
  valid_what="the $(wc -l <"$valid_src") lines of $valid_src"
  if ((dry)); then
    head -n 100 "$valid_src" >"$work/valid.src" && head -n 100 "$valid_ref" >"$work/valid.ref"
    valid_what="the first 100 lines of $valid_src" valid_src=$work/valid.src valid_ref=$work/valid.ref
  fi
  note "nmt: flash attention, $nmt_rule, no validation during training; tokens/s over its logged" \
    "windows after the first (warm-up). PyTorch: \`bench/torch_reference.py --device $device --precision bf16\`," \
    "$py_rule (start-up and decoding not counted), tokens/s after its first 3 steps; compiled: after its" \
    "first 10 steps, which compile the model, and its budget starts after them. Tokenizers: nmt's, from its" \
    "prepared corpus. Validation BLEU: greedy decoding of $valid_what by each run's last checkpoint, every" \
    "run's translations scored by nmt."
  rows=$work/rows_$config_name.tsv
  : >"$rows"
  for prec in float32 bf16; do nmt_run "nmt $prec" "$prec" 1; done
  if ((first_config && baseline)); then
    for prec in "${baseline_precs[@]}"; do nmt_run "nmt $prec, unfused" "$prec" 0; done
  fi

  spm=$(find "$work/prepared" -name src.model -printf '%h\n' 2>/dev/null | head -1)
  IFS=, read -ra modes <<<"${pytorch_modes/none/}"
  for mode in "${modes[@]}"; do
    name="PyTorch bf16 $mode"
    if ((!torch_ok)); then
      note "$name: skipped: no torch in $py."
      row "$name" "" "" "" "" "skipped: no torch"
      continue
    fi
    if [ "$mode" = compile ] && ((!has_compile)); then
      note "$name: not available (PyTorch $torch_version has no torch.compile)."
      row "$name" "" "" "" "" "not available: PyTorch $torch_version has no torch.compile"
      continue
    fi
    if [ "$mode" = compile ] && ((dry)); then
      note "$name: skipped in the dry run (inductor compiles for over a minute on a small CPU)."
      row "$name" "" "" "" "" "skipped: dry run"
      continue
    fi
    if [ -z "$spm" ]; then
      note "$name: no tokenizers (nmt's corpus preparation failed)."
      row "$name" "" "" "" "" "failed: no tokenizers"
      failed+=("pytorch-$config_name-$mode (no tokenizers)")
      continue
    fi
    args=(bench/torch_reference.py --config "$config" --device "$device" "${threads[@]}" --precision bf16
          --src-model "$spm/src.model" --tgt-model "$spm/tgt.model" "${py_budget[@]}"
          --eval-src "$valid_src" --eval-ref "$valid_ref" --hyp-out "$work/pytorch_${config_name}_$mode.hyp")
    limit=$train_limit
    [ "$mode" = compile ] && args+=(--compile --warmup-steps-excluded 10 --budget-after-warmup) limit=$compile_limit
    PY=1 LIMIT=$limit TAIL=6 record "train-$config_name-pytorch-$mode" "$py" "${args[@]}"
    result=$(grep '^RESULT' "$log" | tail -1)
    if [ -z "$result" ] || [ ! -f "$work/pytorch_${config_name}_$mode.hyp" ]; then
      row "$name" "" "" "" "" "failed"
      continue
    fi
    LIMIT=120 TAIL=4 record "score-$config_name-pytorch-$mode" "$nmt" score \
      --hyp "$work/pytorch_${config_name}_$mode.hyp" --ref "$valid_ref"
    extra=
    [ "$mode" = compile ] && extra="first 10 steps (compilation): $(field warmup_seconds) s"
    row "$name" "$(field tokens_per_s | cut -d. -f1)" "$(field steps)" "$(field train_seconds)" "$(bleu_in "$log")" "$extra"
  done
  pyq - "$rows" >>"$report" <<'EOF2'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
num = lambda s: float(s) if s and s != "nan" else None
by = {r[0]: r for r in rows if num(r[1])}
ref = by.get("nmt bf16") or by.get("nmt float32")
print(f"| run | tokens/s | steps | training s | validation BLEU | tokens/s ÷ {ref[0] if ref else 'nmt'} | note |")
print("|---|--:|--:|--:|--:|--:|---|")
for name, tok, steps, secs, bleu, note in rows:
    ratio = f"{num(tok) / num(ref[1]):.2f}" if ref and num(tok) else ""
    secs = f"{num(secs):.1f}" if num(secs) is not None else ""
    print(f"| {name} | {tok} | {steps} | {secs} | {bleu} | {ratio} | {note} |")
print()
if "nmt bf16" in by and "nmt float32" in by:
    print(f"nmt bf16 against nmt float32: {num(by['nmt bf16'][1]) / num(by['nmt float32'][1]):.2f}× tokens/s.")
for unfused in ("nmt float32, unfused", "nmt bf16, unfused"):
    fused = unfused.split(",")[0]
    if unfused in by and fused in by:
        print(f"{fused} with its fused CUDA ops against without: {num(by[fused][1]) / num(by[unfused][1]):.2f}× tokens/s.")
torch_rows = [r for r in rows if r[0].startswith("PyTorch") and num(r[1])]
if ref and torch_rows:
    best = max(torch_rows, key=lambda r: num(r[1]))
    print(f"{ref[0]} against the fastest PyTorch mode ({best[0]}): {num(ref[1]) / num(best[1]):.2f}× tokens/s.")
print()
EOF2

  if ((first_config && profile_steps > 0)); then
    for prec in "${profile_precs[@]}"; do
      for fused in 1 $( ((baseline)) && echo 0); do
        [ "$prec" = bf16 ] && ((!fast_bf16)) && continue
        TAIL=100 LIMIT=240 record "profile-$config_name-$prec-$fused" env NMT_CUDA_FUSED_OPS="$fused" "$nmt" train \
          --config "$config" --device "$device" "${threads[@]}" --attention flash --set train.precision="$prec" \
          --set train.checkpoint_dir="$work/profile_${prec}_$fused" --set tokenizer.protect_placeholders=false \
          --set data.prepared_dir="$work/prepared" --profile "$profile_steps"
      done
    done
  fi
  first_config=0
done

section "Summary"
{
  echo "| section | seconds |"
  echo "|---|--:|"
  for t in "${times[@]}"; do echo "| ${t%|*} | ${t##*|} |"; done
  echo "| all | $SECONDS |"
  echo
} >>"$report"
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}" | tee -a "$report" >&2
  exit 1
fi
echo "every check ran and passed ($SECONDS s)" | tee -a "$report" >&2
