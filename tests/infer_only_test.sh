#!/usr/bin/env bash
# The inference library stands alone: examples/translate.cpp (nmt::Translator), linked against
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
# Its options: a compute type and a beam, as nmt translate's flags give them.
"$nmt" translate --checkpoint "$tmp/run" --input "$tmp/in.zh" --compute-type int8 --beam 3 >"$tmp/nmt3.en" 2>/dev/null ||
  bad "nmt translate --compute-type int8 --beam 3 failed"
"$infer" "$tmp/run" int8 3 <"$tmp/in.zh" >"$tmp/infer3.en" 2>"$tmp/infer3.log" || bad "infer_only int8 3: $(tail -1 "$tmp/infer3.log")"
if [ "$(wc -l <"$tmp/infer3.en")" -eq 20 ] && cmp -s "$tmp/nmt3.en" "$tmp/infer3.en"; then ok
else bad "infer_only int8 beam 3 differs from nmt translate --compute-type int8 --beam 3"; fi
"$infer" "$tmp/run" int4 </dev/null 2>"$tmp/bad.log"
rc=$?
if [ $rc -eq 2 ] && grep -q "compute type: 'int4' is not one of: float32 | bf16 | int8 | auto" "$tmp/bad.log"; then ok
else bad "infer_only int4: exit $rc, $(cat "$tmp/bad.log")"; fi

# Symbols of the training library (trainer parts, c10d data parallel): in
# nmt, and nowhere in the inference-only program.
train_symbols='nmt::C10dGradientSync|nmt::CheckpointManager|nmt::TrainStep|nmt::save_checkpoint|c10d::ProcessGroupGloo'
in_nmt=$(nm -C "$nmt" | grep -cE "$train_symbols")
in_infer=$(nm -C "$infer" | grep -cE "$train_symbols")
if [ "$in_nmt" -gt 0 ] && [ "$in_infer" -eq 0 ]; then ok
else bad "training symbols: $in_nmt in nmt, $in_infer in infer_only: $(nm -C "$infer" | grep -E "$train_symbols" | head -3)"; fi
echo "infer only: 20 lines identical to nmt translate; training symbols: $in_nmt in nmt, $in_infer in infer_only"
summary "infer only"
