#!/usr/bin/env bash
# The inference library stands alone: tests/infer_only.cpp, linked against
# nmt_infer only, translates a trained checkpoint exactly as `nmt translate`
# does, and none of the training library's code is in it.
# Usage: infer_only_test.sh NMT_BINARY INFER_ONLY_BINARY SOURCE_DIR
set -u
nmt=$1
infer=$2
src=$3
. "$(dirname "$0")/lib.sh"
make_temp_dir
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
head -20 "$src/data/toy/valid.zh" >"$tmp/in.zh"

"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=30 --set train.checkpoint_dir="$tmp/run" >"$tmp/train.log" 2>&1 ||
  bad "train: $(tail -2 "$tmp/train.log")"
"$nmt" translate --checkpoint "$tmp/run" --input "$tmp/in.zh" >"$tmp/nmt.en" 2>/dev/null || bad "nmt translate failed"
"$infer" "$tmp/run" <"$tmp/in.zh" >"$tmp/infer.en" 2>"$tmp/infer.log" || bad "infer_only: $(tail -1 "$tmp/infer.log")"
if [ "$(wc -l <"$tmp/infer.en")" -eq 20 ] && cmp -s "$tmp/nmt.en" "$tmp/infer.en"; then ok
else bad "infer_only's translations differ from nmt translate's"; fi

# Symbols of the training library (trainer parts, c10d data parallel): in
# nmt, and nowhere in the inference-only program.
train_symbols='nmt::C10dGradientSync|nmt::CheckpointManager|nmt::TrainStep|nmt::save_checkpoint|c10d::ProcessGroupGloo'
in_nmt=$(nm -C "$nmt" | grep -cE "$train_symbols")
in_infer=$(nm -C "$infer" | grep -cE "$train_symbols")
if [ "$in_nmt" -gt 0 ] && [ "$in_infer" -eq 0 ]; then ok
else bad "training symbols: $in_nmt in nmt, $in_infer in infer_only: $(nm -C "$infer" | grep -E "$train_symbols" | head -3)"; fi
echo "infer only: 20 lines identical to nmt translate; training symbols: $in_nmt in nmt, $in_infer in infer_only"
summary "infer only"
