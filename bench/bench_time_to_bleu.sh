#!/usr/bin/env bash
# Time to quality: BLEU against training time, nmt vs the PyTorch reference
# script (bench/torch_reference.py: same config, data, tokenizer models,
# batching, threads), one after the other on the same machine.
#
#  1. nmt trains CONFIG for M/2 minutes of wall time (evaluations included,
#     so its training time is less), and its best/ is scored on the test split;
#  2. the run is resumed up to M minutes and scored again;
#  3. the PyTorch script trains M minutes (its own clock counts training
#     steps only, evaluations left out), greedy-translates the test split, and
#     nmt scores that (the same scorer for both);
#  4. both validation-BLEU curves (PyTorch's evaluation hypotheses are scored
#     by nmt too) go into one chart against training minutes.
# Writes OUT/time_to_bleu.md, OUT/time_to_bleu.svg and the metrics files.
#
# Usage: bench/bench_time_to_bleu.sh [--minutes M] [--precision P] [--out DIR] [CONFIG]
#   defaults: 30 minutes, nmt at train.precision (PyTorch in float32, as a
#   user runs it), docs/bench, configs/real.yaml
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30 out=docs/bench config=configs/real.yaml precision=
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
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
"$nmt" train --config "$config" "${prec[@]}" --set train.max_minutes="$half" \
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

echo "== PyTorch script: $minutes minutes of training"
$python bench/torch_reference.py --config "$config" --src-model "$work/nmt/last/src.model" \
  --tgt-model "$work/nmt/last/tgt.model" --max-minutes "$minutes" --eval-minutes 5 \
  --hyp-dir "$work/ref_hyps" --hyp-out "$work/ref_test.en" --final-src "$test_src" \
  --metrics "$work/ref_metrics.jsonl" >"$work/ref.log" 2>&1
br=$(bleu_of "$work/ref_test.en" "$test_ref")
ref_result=$(grep '^RESULT' "$work/ref.log")
echo "PyTorch: $ref_result; test BLEU $br"
# Its validation curve, scored by nmt like nmt's own.
: >"$out/time_to_bleu_pytorch.jsonl"
for f in "$work"/ref_hyps/*.txt; do
  s=$(basename "$f" .txt)  # training seconds, zero-padded: 00300.2
  echo "{\"train_seconds\": $(awk "BEGIN{print $s + 0}"), \"valid_bleu\": $(bleu_of "$f" "$valid_ref")}" >>"$out/time_to_bleu_pytorch.jsonl"
done
$python scripts/plot_metrics.py "$out/time_to_bleu_nmt.jsonl" "$out/time_to_bleu_pytorch.jsonl" \
  --label nmt --label PyTorch --x minutes --series valid_bleu \
  --title "Validation BLEU against training time ($(basename "$config"), 2 threads)" -o "$out/time_to_bleu.svg"

$python - "$out/time_to_bleu.md" "$config" "$minutes" "$b1" "$t1" "$w1" "$b2" "$t2" "$w2" "$s2" "$br" "$ref_result" <<'EOF'
import sys
path, config, minutes, b1, t1, w1, b2, t2, w2, s2, br, ref = sys.argv[1:]
res = dict(kv.split("=") for kv in ref.split()[1:])
m = lambda s: float(s) / 60
lines = [f"# Time to BLEU: {config}, {minutes} minutes", "",
         "Greedy test BLEU (sacreBLEU-compatible, `nmt score`) of the checkpoint each trainer has after the time shown.",
         "nmt's times include its validation runs (wall clock); the PyTorch script's count training steps only.", "",
         "| trainer | training minutes | wall minutes | steps | test BLEU |", "|---|--:|--:|--:|--:|",
         f"| nmt | {m(t1):.1f} | {m(w1):.1f} | | {b1} |",
         f"| nmt | {m(t2):.1f} | {m(w2):.1f} | {s2} | {b2} |",
         f"| PyTorch script | {m(res['train_seconds']):.1f} | | {res['steps']} | {br} |", "",
         f"nmt reaches the PyTorch script's {minutes}-minute BLEU ({br}) "
         + (f"within {m(w1):.1f} wall minutes: {'yes' if float(b1) >= float(br) else 'no'} (BLEU {b1})."),
         "", "![BLEU against time](time_to_bleu.svg)", ""]
open(path, "w").write("\n".join(lines))
print("\n".join(lines))
EOF
