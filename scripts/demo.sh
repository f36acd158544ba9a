#!/usr/bin/env bash
# Trains the toy zh→en model, scores it on the test split and translates a few
# sentences. Extra arguments go to `nmt train` (e.g. --attention flash).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
nmt=${NMT_BUILD_DIR:-build}/nmt

start=$(date +%s)
"$nmt" train --config configs/toy.yaml "$@"
echo "demo: training took $(( $(date +%s) - start )) s"

echo "demo: scoring data/toy/test"
"$nmt" evaluate --checkpoint checkpoints/toy --src data/toy/test.zh --ref data/toy/test.en

echo "demo: example translations"
printf '%s\n' 我爱水课 他喜欢猫 我们明天去学校 你昨天看见了三只狗吗？ >checkpoints/toy/examples.zh
paste -d'\t' checkpoints/toy/examples.zh <("$nmt" translate --checkpoint checkpoints/toy --input checkpoints/toy/examples.zh) \
  | sed 's/\t/  →  /'
