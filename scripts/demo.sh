#!/usr/bin/env bash
# Trains the toy zh→en model until its validation BLEU reaches
# train.stop_at_bleu (configs/toy.yaml), scores it on the test split (greedy
# and beam 4), translates a few sentences and draws an attention map and the
# training curves. Installs and builds only what it runs (scripts/setup.sh
# --demo: no test packages, the `nmt` target alone). Extra arguments go to
# `nmt train` (e.g. --attention flash).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh --demo
echo "demo: setup took $(( $(date +%s) - start )) s"
nmt=${NMT_BUILD_DIR:-build}/nmt
run=checkpoints/toy

train_start=$(date +%s)
# --overwrite: a re-run starts the toy run afresh (a run folder with checkpoints
# is otherwise refused, so that a finished run is not lost by accident).
"$nmt" train --config configs/toy.yaml --overwrite "$@"
echo "demo: training took $(( $(date +%s) - train_start )) s"

echo "demo: scoring data/toy/test (greedy)"
"$nmt" evaluate --checkpoint "$run" --src data/toy/test.zh --ref data/toy/test.en
echo "demo: scoring data/toy/test (beam 4)"
"$nmt" evaluate --checkpoint "$run" --src data/toy/test.zh --ref data/toy/test.en --beam 4 --length-penalty 0.6

echo "demo: example translations"
printf '%s\n' 我爱水课 他喜欢猫 我们明天去学校 你昨天看见了三只狗吗？ >"$run/examples.zh"
paste -d'\t' "$run/examples.zh" <("$nmt" translate --checkpoint "$run" --input "$run/examples.zh") \
  | sed 's/\t/  →  /'

echo 我爱水课 | "$nmt" translate --checkpoint "$run" --attention-map "$run/attention_map.svg" >/dev/null
/usr/bin/python3 scripts/plot_metrics.py "$run/metrics.jsonl" "$run/metrics.svg"
echo "demo: figures in $run/attention_map.svg and $run/metrics.svg"
echo "demo: total $(( $(date +%s) - start )) s"
