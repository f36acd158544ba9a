#!/usr/bin/env bash
# Time to quality: BLEU against training time, nmt vs the PyTorch reference
# script (bench/torch_reference.py: same config, data, tokenizer models,
# batching, threads), one after the other on the same machine.
#
#  1. nmt trains CONFIG for M/2 minutes of wall time (evaluations included,
#     so its training time is less), and its best/ is scored on the test split;
#  2. the run is resumed up to M minutes and scored again;
#  3. the PyTorch script trains M minutes under PyTorch 2.15 (the peers
#     environment, tuned as in bench_train.sh; --peer-precision and
#     --peer-compile pick the mode, default the fastest there: bf16 eager),
#     its own clock counting training steps only (evaluations left out); it
#     greedy-translates the test split at M/2 and M minutes, and nmt scores
#     those (the same scorer for both);
#  4. both validation-BLEU curves (PyTorch's evaluation hypotheses are scored
#     by nmt too) go into one chart against training minutes.
# Writes OUT/time_to_bleu.md, OUT/time_to_bleu.svg and the metrics files.
#
# Usage: bench/bench_time_to_bleu.sh [--minutes M] [--precision P] [--peer-precision P] [--peer-compile] [--out DIR] [CONFIG]
#   defaults: 30 minutes, nmt at train.precision, PyTorch bf16 eager,
#   docs/bench, configs/real.yaml
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30 out=docs/bench config=configs/real.yaml precision= peer_precision=bf16 peer_compile=()
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --peer-precision) peer_precision=$2; shift 2 ;;
    --peer-compile) peer_compile=(--compile --warmup-steps-excluded 10); shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "bench_time_to_bleu: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) config=$1; shift ;;
  esac
done
[ -f "$config" ] || { echo "bench_time_to_bleu: $config: no such config" >&2; exit 2; }
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "bench_time_to_bleu: --minutes: '$minutes' is not a number" >&2; exit 2; }
python=/usr/bin/python3
$python -c 'import torch, sentencepiece, yaml' 2>/dev/null ||
  { echo "bench_time_to_bleu: $python needs python3-torch, python3-sentencepiece, python3-yaml" >&2; exit 2; }
scripts/setup.sh >/dev/null
peer_python=$(bench/peers_env.sh)
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -f $jemalloc ] || jemalloc=
nmt=${NMT_BUILD_DIR:-build}/nmt
work=${KEEP_DIR:-$(mktemp -d)}
mkdir -p "$out" "$work"
field() { $python -c "import yaml,sys; c=yaml.safe_load(open(sys.argv[1])); print(c['data'][sys.argv[2]])" "$config" "$1"; }
test_src=$(field test_src) test_ref=$(field test_tgt) valid_ref=$(field valid_tgt)
half=$($python -c "print($minutes / 2)")
prec=()
[ -n "$precision" ] && prec=(--set train.precision="$precision")
bleu_of() { "$nmt" score --hyp "$1" --ref "$2" 2>/dev/null | sed -n 's/^BLEU = \([0-9.]*\).*/\1/p'; }
test_bleu() {  # checkpoint -> test BLEU of its greedy translations
  "$nmt" translate --checkpoint "$1" --input "$test_src" --output "$work/hyp.en" 2>/dev/null
  bleu_of "$work/hyp.en" "$test_ref"
}
seconds_in() { sed -n "s/^$1: //p" "$2"; }

echo "== nmt: $half minutes, then resumed to $minutes"
# Placeholder protection off: the PyTorch script reads raw lines, and both
# must learn the same task from the same tokens.
"$nmt" train --config "$config" "${prec[@]}" --set tokenizer.protect_placeholders=false --set train.max_minutes="$half" \
  --set train.checkpoint_dir="$work/nmt" --set train.progress=false >"$work/nmt_1.log" 2>&1
b1=$(test_bleu "$work/nmt/best")
t1=$(seconds_in train_seconds "$work/nmt/last/state.yaml") w1=$(seconds_in wall_seconds "$work/nmt/last/state.yaml")
echo "nmt after $w1 s wall ($t1 s training): test BLEU $b1"
"$nmt" train --resume "$work/nmt" --set train.max_minutes="$minutes" >"$work/nmt_2.log" 2>&1
b2=$(test_bleu "$work/nmt/best")
t2=$(seconds_in train_seconds "$work/nmt/last/state.yaml") w2=$(seconds_in wall_seconds "$work/nmt/last/state.yaml")
s2=$(seconds_in step "$work/nmt/last/state.yaml")
echo "nmt after $w2 s wall ($t2 s training, $s2 steps): test BLEU $b2"
cp "$work/nmt/metrics.jsonl" "$out/time_to_bleu_nmt.jsonl"

echo "== PyTorch 2.15 ($peer_precision${peer_compile:+, compiled}): $minutes minutes of training"
env OMP_WAIT_POLICY=PASSIVE ${jemalloc:+LD_PRELOAD=$jemalloc} "$peer_python" bench/torch_reference.py \
  --config "$config" --src-model "$work/nmt/last/src.model" --precision "$peer_precision" "${peer_compile[@]}" \
  --tgt-model "$work/nmt/last/tgt.model" --max-minutes "$minutes" --eval-minutes 5 --test-minutes "$half" \
  --hyp-dir "$work/ref_hyps" --hyp-out "$work/ref_test.en" --final-src "$test_src" \
  --metrics "$work/ref_metrics.jsonl" >"$work/ref.log" 2>&1
br=$(bleu_of "$work/ref_test.en" "$test_ref")
half_hyp=$(ls "$work"/ref_hyps/test_*.txt | head -1)
br_half=$(bleu_of "$half_hyp" "$test_ref")
t_half=$(basename "$half_hyp" .txt | sed 's/^test_//')
ref_result=$(grep '^RESULT' "$work/ref.log")
echo "PyTorch: $ref_result; test BLEU $br"
# Its validation curve, scored by nmt like nmt's own.
: >"$out/time_to_bleu_pytorch.jsonl"
for f in "$work"/ref_hyps/[0-9]*.txt; do
  s=$(basename "$f" .txt)  # training seconds, zero-padded: 00300.2
  echo "{\"train_seconds\": $(awk "BEGIN{print $s + 0}"), \"valid_bleu\": $(bleu_of "$f" "$valid_ref")}" >>"$out/time_to_bleu_pytorch.jsonl"
done
$python scripts/plot_metrics.py "$out/time_to_bleu_nmt.jsonl" "$out/time_to_bleu_pytorch.jsonl" \
  --label nmt --label "PyTorch 2.15" --x minutes --series valid_bleu \
  --title "Validation BLEU against training time ($(basename "$config"), 2 threads)" -o "$out/time_to_bleu.svg"

peer_label="PyTorch 2.15 $peer_precision${peer_compile:+ compiled}"
$python - "$out/time_to_bleu.md" "$config" "$minutes" "$b1" "$t1" "$w1" "$b2" "$t2" "$w2" "$s2" "$br" "$ref_result" \
  "$br_half" "$t_half" "$peer_label" <<'EOF'
import sys
path, config, minutes, b1, t1, w1, b2, t2, w2, s2, br, ref, br_half, t_half, peer = sys.argv[1:]
res = dict(kv.split("=") for kv in ref.split()[1:])
m = lambda s: float(s) / 60
lines = [f"# Time to BLEU: {config}, {minutes} minutes", "",
         "Greedy test BLEU (sacreBLEU-compatible, `nmt score`) of the checkpoint each trainer has after the time shown.",
         "nmt's times include its validation runs (wall clock); the PyTorch script's count training steps only.", "",
         "| trainer | training minutes | wall minutes | steps | test BLEU |", "|---|--:|--:|--:|--:|",
         f"| nmt | {m(t1):.1f} | {m(w1):.1f} | | {b1} |",
         f"| nmt | {m(t2):.1f} | {m(w2):.1f} | {s2} | {b2} |",
         f"| {peer} | {m(t_half):.1f} | | | {br_half} |",
         f"| {peer} | {m(res['train_seconds']):.1f} | | {res['steps']} | {br} |", "",
         f"Peer: bench/torch_reference.py under {peer}, OMP_WAIT_POLICY=PASSIVE, jemalloc, fused Adam.", "",
         f"nmt reaches the peer's {minutes}-minute BLEU ({br}) "
         + (f"within {m(w1):.1f} wall minutes: {'yes' if float(b1) >= float(br) else 'no'} (BLEU {b1})."),
         "", "![BLEU against time](time_to_bleu.svg)", ""]
open(path, "w").write("\n".join(lines))
print("\n".join(lines))
EOF
