#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: everything a CUDA build of nmt should show
# there, run in one go, written to one report (Markdown).
#   1. the build and the GPU (nmt --version, nvidia-smi)
#   2. correctness: the CUDA test cases (every backend against the float64
#      CPU reference, fully masked rows, strided inputs, gradients, bf16
#      inputs, dQ run to run), the kernels alone against a CPU loop, and the
#      causality check both ways on a freshly trained toy model
#   3. the attention benchmark on the GPU, float32 and bf16 inputs: ours
#      against LibTorch's fused SDPA (the `torch` backend), ms, TFLOP/s and
#      peak memory, T = 512..8192, head dims 64 and 128, B = 8, H = 8
#   4. short training runs with --device cuda, float32 and bf16, against the
#      same run on the CPU: tokens/s
# bench/bench_gpu.sh is the time-boxed counterpart (about 8 minutes): the same
# CUDA test cases (no causality check), fewer attention cases, and training
# against PyTorch on the same GPU.
#
# Usage: scripts/gpu_check.sh [--build-dir DIR] [--report FILE] [--train-minutes M]
#          [--toy-minutes M] [--bench-lens LIST] [--bench-dims LIST]
#   defaults: build-cuda (made by scripts/build_cuda.sh if missing),
#             gpu_check_report.md, 2 minutes per training run (fractions
#             allowed), 1 minute for the toy model, lengths
#             512,1024,2048,4096,8192, head dims 64,128
# Exit 0 when every check passed, 1 when one failed (the report says which),
# 2 without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build-cuda report=gpu_check_report.md minutes=2 toy_minutes=1
lens=512,1024,2048,4096,8192 dims=64,128
while (($#)); do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    --train-minutes) minutes=$2; shift 2 ;;
    --toy-minutes) toy_minutes=$2; shift 2 ;;
    --bench-lens) lens=$2; shift 2 ;;
    --bench-dims) dims=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 ||
  { echo "gpu_check: no NVIDIA GPU here (nvidia-smi -L fails)" >&2; exit 2; }
if [ ! -x "$build/nmt" ]; then
  scripts/build_cuda.sh --build-dir "$build" || exit 1
fi
nmt=$build/nmt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
section() { printf '\n## %s\n\n' "$1" >>"$report"; echo "gpu_check: $1" >&2; }
# Runs a command, appends its output (last lines) to the report as a block.
record() {
  local name=$1; shift
  local out=$work/out.txt rc=0
  "$@" >"$out" 2>&1 || rc=$?
  { echo "\`$*\` (exit $rc)"; echo; echo '```'; tail -n "${TAIL:-40}" "$out"; echo '```'; } >>"$report"
  ((rc == 0)) || failed+=("$name")
  return $rc
}

echo "# nmt on a GPU: $(date -u '+%Y-%m-%d %H:%M UTC')" >"$report"
section "Build and device"
record version "$nmt" --version
record nvidia-smi nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv

section "Correctness"
# The attention suite's CUDA cases and the CUDA-only ones. A case skipped
# because CUDA or our kernels are missing counts as a failure (float32 cases
# skip the float64-only finite-difference check by design).
TAIL=25 record gtest-cuda "$build/tests/nmt_tests" --gtest_filter='*cuda*:*Cuda*:*CUDA*'
grep -q -e 'CUDA is not available' -e 'no CUDA attention kernels' "$work/out.txt" &&
  failed+=("gtest-cuda skipped cases")
record flash-standalone "$build/tests/flash_standalone_test"
# A toy model trained on the GPU, then the causality check both ways: it
# must pass with the mask and fail (exit 1) without it.
cfg=$work/toy.yaml
sed "s|checkpoint_dir:.*|checkpoint_dir: $work/toy_run|" configs/toy.yaml >"$cfg"
TAIL=5 record train-toy "$nmt" train --config "$cfg" --device cuda --set train.max_minutes="$toy_minutes"
for backend in torch naive flash; do
  TAIL=5 record "causality-$backend" "$nmt" check-causality --checkpoint "$work/toy_run" --device cuda --attention "$backend"
  TAIL=5 "$nmt" check-causality --checkpoint "$work/toy_run" --device cuda --attention "$backend" \
    --disable-causal-mask >"$work/out.txt" 2>&1
  rc=$?
  echo "without the causal mask, $backend: exit $rc (1 expected)" >>"$report"
  ((rc == 1)) || failed+=("causality-$backend without mask")
done

for dtype in float32 bf16; do
  section "Attention benchmark, $dtype inputs (torch = LibTorch's fused SDPA)"
  csv=$work/attention_$dtype.csv
  TAIL=200 record "bench-attention-$dtype" "$nmt" bench-attention --device cuda --dtype "$dtype" \
    --backends torch,flash --lens "$lens" --head-dims "$dims" --csv "$csv"
  [ -f "$csv" ] || continue
  # flash against torch per case: the ratio of their times.
  python3 - "$csv" >>"$report" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
key = lambda r: (r["pass"], r["batch"], r["heads"], r["q_len"], r["k_len"], r["head_dim"], r["causal"])
torch = {key(r): r for r in rows if r["backend"] == "torch"}
print("\n| pass | B | H | Tq | Tk | D | causal | flash ms | SDPA ms | flash / SDPA speed | flash TFLOP/s | SDPA TFLOP/s | flash peak MB | SDPA peak MB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["backend"] != "flash" or key(r) not in torch or not r["ms_median"] or not torch[key(r)]["ms_median"]:
        continue
    t = torch[key(r)]
    print(f"| {r['pass']} | {r['batch']} | {r['heads']} | {r['q_len']} | {r['k_len']} | {r['head_dim']} | {r['causal']} "
          f"| {float(r['ms_median']):.3f} | {float(t['ms_median']):.3f} | {float(t['ms_median']) / float(r['ms_median']):.2f} "
          f"| {float(r['gflops']) / 1e3:.1f} | {float(t['gflops']) / 1e3:.1f} | {r['peak_mb']} | {t['peak_mb']} |")
EOF
done

section "Training tokens/s: GPU against CPU ($minutes min each, configs/real.yaml)"
for run in "cuda float32" "cuda bf16" "cpu auto"; do
  set -- $run
  dir=$work/real_$1_$2
  TAIL=3 record "train-$1-$2" "$nmt" train --config configs/real.yaml --device "$1" \
    --set train.precision="$2" --set train.max_minutes="$minutes" --set train.checkpoint_dir="$dir"
  [ -f "$dir/metrics.jsonl" ] && python3 - "$dir/metrics.jsonl" "$1 $2" >>"$report" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tps = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
print(f"\n{sys.argv[2]}: median tokens/s {sorted(tps)[len(tps) // 2]:.0f} over {len(tps)} reports" if tps else f"\n{sys.argv[2]}: no tokens/s reported")
EOF
done

section "Summary"
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}" | tee -a "$report" >&2
  exit 1
fi
echo "every check passed" | tee -a "$report" >&2
