#!/usr/bin/env bash
# Data-parallel training speed on one machine: 1 process × all cores against
# N processes × (cores / N) threads, the same config and global batch, one
# run after the other. Prints tokens/s of both, the gradient volume
# all-reduced per step and the time a step waits for it after the backward
# pass (the part not hidden behind the backward), and from those an estimate
# for 8 GPUs with NCCL. Writes OUT/ddp.md.
#
# Usage: bench/bench_ddp.sh [--minutes M] [--nproc N] [--out DIR] [CONFIG]
#   defaults: 1.5 minutes a run, N = 2, docs/bench, configs/toy.yaml
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=1.5 nproc=2 out=docs/bench config=configs/toy.yaml
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --nproc) nproc=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "bench_ddp: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) config=$1; shift ;;
  esac
done
[ -f "$config" ] || { echo "bench_ddp: $config: no such config" >&2; exit 2; }
[[ $nproc =~ ^[2-9]$ ]] || { echo "bench_ddp: --nproc: '$nproc' is not in 2..9" >&2; exit 2; }
scripts/setup.sh >/dev/null
nmt=${NMT_BUILD_DIR:-build}/nmt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cores=$(nproc)

run() {  # name nproc threads
  "$nmt" train --config "$config" --nproc "$2" --threads "$3" --set train.max_minutes="$minutes" \
    --set train.max_steps=0 --set train.max_epochs=0 --set train.eval_every=1000000000 \
    --set train.valid_bleu_sentences=0 --set train.best_metric=loss --set train.valid_max_sentences=8 \
    --set train.progress=false --set train.checkpoint_dir="$work/$1" >"$work/$1.log" 2>&1 ||
    { echo "bench_ddp: $1 failed:" >&2; tail -5 "$work/$1.log" >&2; exit 1; }
}
run one 1 "$cores"
run many "$nproc" $((cores / nproc > 0 ? cores / nproc : 1))

/usr/bin/python3 - "$work/one.log" "$work/many.log" "$out/ddp.md" "$config" "$minutes" "$nproc" "$cores" <<'EOF'
import re, sys
one, many, path, config, minutes, nproc, cores = sys.argv[1:]
def result(log):
    text = open(log).read()
    m = re.search(r"train: (\d+) steps in ([\d.]+) s of training, (\d+) tok/s", text)
    d = re.search(r"distributed: ([\d.]+) MB of gradients all-reduced per step, ([\d.]+) ms per step", text)
    return int(m.group(1)), float(m.group(2)), float(m.group(3)), (float(d.group(1)), float(d.group(2))) if d else None
s1, t1, k1, _ = result(one)
sn, tn, kn, (mb, wait_ms) = result(many)
step_ms = 1e3 * tn / sn
nproc, cores = int(nproc), int(cores)
# 8 GPUs, NCCL ring all-reduce: each GPU sends and receives 2(n-1)/n of the
# gradient bytes. Assumed bus bandwidth: 150 GB/s (NVLink/NVSwitch, H100
# class, messages of a few MB), and that the buckets overlap the backward
# pass as they do here, so only the last bucket's all-reduce is exposed.
bus = 150e9
ring_ms = 1e3 * 2 * 7 / 8 * mb * 1e6 / bus
last_bucket_ms = 1e3 * 2 * 7 / 8 * min(mb, 4.0) * 1e6 / bus
lines = [f"# Data-parallel training: {config}, {minutes}-minute runs, {cores} cores", "",
         f"Command: `bench/bench_ddp.sh --minutes {minutes} --nproc {nproc} {config}`", "",
         "| layout | steps | tokens/s | ms/step | gradients all-reduced per step | waiting for them after the backward |",
         "|---|--:|--:|--:|--:|--:|",
         f"| 1 process × {cores} threads | {s1} | {k1:,.0f} | {1e3 * t1 / s1:.1f} | — | — |",
         f"| {nproc} processes × {max(cores // nproc, 1)} thread(s) | {sn} | {kn:,.0f} | {step_ms:.1f} | {mb:.1f} MB | {wait_ms:.1f} ms ({100 * wait_ms / step_ms:.1f}% of a step) |",
         "", f"{nproc} processes / 1 process: {kn / k1:.2f}× the tokens/s.", "",
         "Estimate for 8 GPUs with NCCL (assumptions: 150 GB/s all-reduce bus bandwidth, buckets",
         "overlapped with the backward pass as here, so only the last 4 MB bucket is exposed):",
         f"a ring all-reduce of {mb:.1f} MB moves 2·7/8 of it per GPU, {ring_ms:.2f} ms in all and "
         f"{last_bucket_ms:.3f} ms for the last bucket. A GPU step of T ms then runs at "
         f"T / (T + {last_bucket_ms:.3f}) of linear scaling: "
         + ", ".join(f"{100 * t / (t + last_bucket_ms):.1f}% at T = {t} ms" for t in (5, 20, 50)) + ".", ""]
open(path, "w").write("\n".join(lines))
print("\n".join(lines))
EOF
