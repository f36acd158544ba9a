#!/usr/bin/env bash
# How far nmt's training speed can go against PyTorch's on this machine, with
# the matrix multiplies both run: each trainer's step split into its matrix
# multiplies, its attention and everything else (nmt train --profile;
# bench/torch_reference.py --profile-steps, torch.profiler's self times),
# the split applied to tokens/s measured without a profiler, and from it:
#   - the ratio now (nmt's tokens/s over PyTorch's eager ones, same precision);
#   - its ceiling: nmt with nothing but its matrix multiplies, at the speed
#     they run in its step (every other op at zero time);
#   - for a goal ratio (--goal), the time a step of nmt may spend outside its
#     matrix multiplies, against what it spends now;
#   - nmt's products and step against the cores' arithmetic peak (a
#     register-only multiply-add loop on the same threads, nmt train --profile).
# PyTorch runs as a user starts it (the default environment of
# bench/bench_train.sh), nmt with --attention flash; both on --threads.
#
# Usage: bench/bench_train_ceiling.sh [--precision float32|bf16] [--threads N] [--isa native|avx2]
#                                     [--steps N] [--goal R] [--python PY] [--nmt PATH] CONFIG
#   defaults: float32, 2 threads, native, 20 steps profiled (PyTorch: 10,
#   and 3 + N plain ones), goal 1.5
#   --python PY: the PyTorch to measure against, a python with torch,
#   sentencepiece and yaml (default: bench/peers_env.sh's, PyTorch 2.15)
#   --nmt PATH: the nmt to measure (default: build/nmt, brought up to date by
#   scripts/setup.sh); the two let it run on a host with neither Debian's
#   packages nor the peers' environment, e.g. a GPU host's CPU with a bundle
#   from scripts/gpu_bundle_build.sh
set -euo pipefail
cd "$(dirname "$0")/.."

precision=float32 threads=2 isa=native steps=20 goal=1.5 config= peer_python= nmt=
while (($#)); do
  case $1 in
    --precision) precision=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --isa) isa=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --goal) goal=$2; shift 2 ;;
    --python) peer_python=$2; shift 2 ;;
    --nmt) nmt=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_train_ceiling: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$config" ] || { echo "bench_train_ceiling: one CONFIG only (got $config and $1)" >&2; exit 2; }
       config=$1; shift ;;
  esac
done
[ -n "$config" ] || { echo "bench_train_ceiling: no CONFIG given (see --help)" >&2; exit 2; }
[ -f "$config" ] || { echo "bench_train_ceiling: $config: no such config" >&2; exit 2; }
case $precision in float32|bf16) ;; *) echo "bench_train_ceiling: --precision: '$precision' is not one of: float32 | bf16" >&2; exit 2 ;; esac
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "bench_train_ceiling: --threads: '$threads' is not a positive integer" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "bench_train_ceiling: --steps: '$steps' is not a positive integer" >&2; exit 2; }
[[ $goal =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "bench_train_ceiling: --goal: '$goal' is not a number" >&2; exit 2; }
case $isa in
  native) ;;
  avx2) source bench/avx2_env.sh
        [ "$precision" = float32 ] || { echo "bench_train_ceiling: --isa avx2 runs float32 only (no bf16 products there)" >&2; exit 2; } ;;
  *) echo "bench_train_ceiling: --isa: '$isa' is not one of: native | avx2" >&2; exit 2 ;;
esac
source bench/train_peers.sh
if [ -n "$peer_python" ]; then
  "$peer_python" -c 'import torch, sentencepiece, yaml' 2>/dev/null ||
    { echo "bench_train_ceiling: --python $peer_python: needs torch, sentencepiece and yaml" >&2; exit 2; }
else
  peer_python=$(bench/peers_env.sh)
fi
if [ -n "$nmt" ]; then
  [ -x "$nmt" ] || { echo "bench_train_ceiling: --nmt $nmt: not an executable" >&2; exit 2; }
else
  scripts/setup.sh >/dev/null
  nmt=${NMT_BUILD_DIR:-build}/nmt
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "bench_train_ceiling: $config: tokenizers" >&2
models=$(tokenizer_models "$nmt" "$config" "$work/prep" bench_train_ceiling)

# nmt: one run gives both, the same batches timed without the profiler, then with it.
echo "bench_train_ceiling: nmt --profile $steps" >&2
"$nmt" train --config "$config" --attention flash --threads "$threads" --set train.precision="$precision" \
  --set train.checkpoint_dir="$work/nmt" --profile "$steps" >"$work/nmt.log" 2>&1 ||
  { echo "bench_train_ceiling: nmt --profile failed, see:" >&2; tail -5 "$work/nmt.log" >&2; exit 1; }
torch_run() {  # log, then torch_reference.py's arguments
  local log=$1; shift
  "${torch_as_started[@]}" "$peer_python" bench/torch_reference.py \
    --config "$config" --src-model "$models/src.model" --tgt-model "$models/tgt.model" \
    --threads "$threads" --precision "$precision" --warmup-steps-excluded 3 --log-every 1000 "$@" >"$log" 2>&1 ||
    { echo "bench_train_ceiling: torch_reference.py failed, see:" >&2; tail -5 "$log" >&2; exit 1; }
}
echo "bench_train_ceiling: PyTorch, $((steps + 3)) steps" >&2
torch_run "$work/torch_plain.log" --max-steps $((steps + 3))
echo "bench_train_ceiling: PyTorch --profile-steps 10" >&2
torch_run "$work/torch_profile.log" --profile-steps 10 --max-minutes 60

"$peer_python" - "$work" "$config" "$precision" "$threads" "$isa" "$goal" \
  "$("$peer_python" -c 'import torch; print(torch.__version__.split("+")[0])')" <<'PY'
import re, sys
work, config, precision, threads, isa, goal, torch_version = sys.argv[1:]
goal = float(goal)

def find(path, pattern, what):
    m = re.search(pattern, open(path).read(), re.M)
    if not m:
        sys.exit(f"bench_train_ceiling: {path}: no {what} (see the log)")
    return [float(g) for g in m.groups()]

n = f"{work}/nmt.log"
n_plain_ms, n_tps = find(n, r"^without the profiler: ([0-9.]+) ms a step, ([0-9.]+) tokens/s", "plain step line")
n_wall, = find(n, r"^step \(wall\)\s+([0-9.]+)", "step (wall) line")
n_gemm, = find(n, r"^matrix multiplies\s+([0-9.]+)", "matrix multiplies class")
n_attn, = find(n, r"^attention\s+([0-9.]+)", "attention class")
p_tps, = find(f"{work}/torch_plain.log", r"^RESULT tokens_per_s=([0-9.]+)", "RESULT line")
p_wall, p_gemm, p_attn = find(f"{work}/torch_profile.log",
                              r"^PROFILE wall_ms=([0-9.]+) gemm_ms=([0-9.]+) attention_ms=([0-9.]+)", "PROFILE line")

ratio = n_tps / p_tps
n_share = n_gemm / n_wall
ceiling = ratio / n_share
outside_now = n_plain_ms * (1 - n_share)
outside_goal = n_plain_ms * (ratio / goal - n_share)
where = "held to AVX2" if isa == "avx2" else "native kernels"
print(f"{config}, {precision}, {threads} threads, {where}: nmt {n_tps:,.0f} tokens/s, "
      f"PyTorch {torch_version} eager {p_tps:,.0f} tokens/s (no profiler): {ratio:.2f}x")
print()
print("| profiled step, ms (share) | nmt | PyTorch |")
print("|---|--:|--:|")
for name, a, b in (("matrix multiplies", n_gemm, p_gemm), ("attention", n_attn, p_attn),
                   ("everything else", n_wall - n_gemm - n_attn, p_wall - p_gemm - p_attn), ("step", n_wall, p_wall)):
    print(f"| {name} | {a:.1f} ({100 * a / n_wall:.0f}%) | {b:.1f} ({100 * b / p_wall:.0f}%) |")
print()
for line in open(n):
    if line.startswith(("all GEMMs:", "the step:", "the GEMMs at")):
        print("nmt's " + line.rstrip())
    elif line.startswith("the cores' arithmetic peak:"):
        print(line.rstrip())
print(f"ceiling: nmt with nothing but its matrix multiplies, at their speed in its step: {ceiling:.2f}x")
if not 1 / 1.15 <= n_wall / n_plain_ms <= 1.15:
    # The split comes from the profiled steps; on a machine whose speed moves
    # between minutes they can run in a slower or a faster one than the plain
    # steps (the H200 host's Xeon: profiled bf16 steps 18% shorter).
    how = (f"{100 * (n_wall / n_plain_ms - 1):.0f}% longer" if n_wall > n_plain_ms
           else f"{100 * (1 - n_wall / n_plain_ms):.0f}% shorter")
    print(f"warning: nmt's profiled steps ran {how} than the same batches "
          f"without the profiler (the machine moved between them?): the split, and the ceiling, may be off; run again")
if outside_goal > 0:
    print(f"at {goal:g}x nmt may spend {outside_goal:.1f} ms of a {n_plain_ms * ratio / goal:.1f} ms step outside its "
          f"matrix multiplies; it spends {outside_now:.1f} ms of {n_plain_ms:.1f} now")
else:
    print(f"{goal:g}x is out of reach with nmt's matrix multiplies at their speed now: their time alone is "
          f"{n_plain_ms * n_share:.1f} ms a step, {goal:g}x allows {n_plain_ms * ratio / goal:.1f} ms in all")
PY
