#!/usr/bin/env bash
# Command-line errors: exit code 2 and one line naming the file/key/line.
# Usage: cli_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
. "$(dirname "$0")/lib.sh"
make_temp_dir

# expect CODE PATTERN -- command...
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1 >/dev/null)
  rc=$?
  # Exactly one error line, and it says what is wrong (log lines may precede it).
  local errors
  errors=$(grep -E '^nmt: (runtime )?error: ' <<<"$out")
  if [ "$rc" -eq "$code" ] && [ "$(grep -c . <<<"$errors")" -eq 1 ] && grep -qE -- "$pattern" <<<"$errors"; then
    ok
  else
    bad "$* -> exit $rc, stderr: $out (wanted exit $code and one line "nmt: error: .../$pattern/")"
  fi
}

printf 'model:\n  d_model: 64\n  haeds: 4\n' >"$tmp/typo.yaml"
expect 2 "typo.yaml:3: model.haeds: unknown key" -- "$nmt" train --config "$tmp/typo.yaml"
printf 'model:\n  d_model: 128\n  heads: 3\n' >"$tmp/heads.yaml"
expect 2 "heads.yaml:3: model.heads: 3 does not divide model.d_model 128" -- "$nmt" train --config "$tmp/heads.yaml"
printf 'train:\n  lr: fast\n' >"$tmp/type.yaml"
expect 2 "type.yaml:2: train.lr: expected a number, got 'fast'" -- "$nmt" train --config "$tmp/type.yaml"
expect 2 "nope.yaml: cannot open config file" -- "$nmt" train --config "$tmp/nope.yaml"
expect 2 "--set model.heads=x: model.heads: expected an integer" -- "$nmt" train --config "$src/configs/toy.yaml" --set model.heads=x
expect 2 "--attention" -- "$nmt" train --config "$src/configs/toy.yaml" --attention fast
expect 2 "The following argument was not expected|not expected|Unknown|unknown" -- "$nmt" train --config "$src/configs/toy.yaml" --bogus
expect 2 "A subcommand is required|subcommand" -- "$nmt"
expect 2 "no such checkpoint folder" -- "$nmt" translate --checkpoint "$tmp/none"
mkdir -p "$tmp/empty"
expect 2 "not a checkpoint" -- "$nmt" translate --checkpoint "$tmp/empty"
printf 'data:\n  train_src: %s/missing.zh\n' "$tmp" >"$tmp/data.yaml"
expect 2 "missing.zh: cannot open" -- "$nmt" train --config "$tmp/data.yaml" --set train.checkpoint_dir="$tmp/ck" --set data.prepared_dir="$tmp/prepared"
expect 2 "cuda" -- "$nmt" train --config "$src/configs/toy.yaml" --device cuda --set train.checkpoint_dir="$tmp/ck"
expect 2 "--dtype: fp16 not in" -- "$nmt" bench-attention --dtype fp16
expect 2 "--dtype bf16: the flash backend has no bf16 CPU kernel" -- "$nmt" bench-attention --device cpu --dtype bf16 --backends torch,flash
expect 2 "--lens" -- "$nmt" bench-attention --lens 0

# ---- Bad data, caught before any tokenizer is trained.
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
head -100 "$src/data/toy/train.zh" >"$tmp/a.zh"
head -99 "$src/data/toy/train.en" >"$tmp/a.en"
# Like expect, and refused before any tokenizer is trained: the log says
# nothing of SentencePiece (the command's own evidence, where a bound on its
# seconds depended on the machine's load: 2 s unloaded, over 4 s beside
# other builds).
expect_fast() {
  local code=$1 pattern=$2
  shift 3
  local out rc errors
  out=$("$@" 2>&1 >/dev/null)
  rc=$?
  errors=$(grep -E '^nmt: (runtime )?error: ' <<<"$out")
  if [ "$rc" -eq "$code" ] && [ "$(grep -c . <<<"$errors")" -eq 1 ] && grep -qE -- "$pattern" <<<"$errors" &&
     ! grep -q "SentencePiece" <<<"$out"; then ok
  else bad "$* -> exit $rc, stderr: $out (wanted exit $code, one line /$pattern/, no tokenizer training)"; fi
}
train_on() { echo "$nmt train --config $tmp/tiny.yaml --set train.checkpoint_dir=$tmp/ck_$1 --set data.train_src=$2 --set data.train_tgt=$3"; }
expect_fast 2 "a.zh: has 100 lines but .*a.en has 99" -- $(train_on counts "$tmp/a.zh" "$tmp/a.en")
: >"$tmp/empty.zh"; : >"$tmp/empty.en"
expect_fast 2 "empty.zh: no sentences \\(empty file\\)" -- $(train_on empty "$tmp/empty.zh" "$tmp/empty.en")
printf '\n\n\n' >"$tmp/blank.zh"; printf 'a\nb\nc\n' >"$tmp/blank.en"
expect_fast 2 "blank.zh: no sentence pairs: each of the 3 lines is empty on one side" -- $(train_on blank "$tmp/blank.zh" "$tmp/blank.en")
{ head -4 "$src/data/toy/train.zh"; printf 'ok\xff\xfe\n'; } >"$tmp/bad.zh"; head -5 "$src/data/toy/train.en" >"$tmp/bad.en"
expect_fast 2 "bad.zh:5: not valid UTF-8 \\(byte 3\\)" -- $(train_on utf8 "$tmp/bad.zh" "$tmp/bad.en")
expect 2 "--threads: -1 is not in 0..256" -- "$nmt" train --config "$tmp/tiny.yaml" --threads -1
expect 2 "--beam: 99 is not in 0..64" -- "$nmt" translate --checkpoint "$tmp" --beam 99
expect 2 "NMT_CPU_ISA: 'sse9' is not one of: generic \\| avx2 \\| avx512 \\| avx512vnni" -- env NMT_CPU_ISA=sse9 "$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/ck_isa"
expect 2 "NMT_CPU_GEMM: 'blas' is not one of: auto \\| onednn \\| mkl" -- env NMT_CPU_GEMM=blas "$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/ck_gemm"

# CRLF line ends and a byte order mark are fine.
{ printf '\xEF\xBB\xBF'; head -300 "$src/data/toy/train.zh" | sed 's/$/\r/'; } >"$tmp/crlf.zh"
head -300 "$src/data/toy/train.en" | sed 's/$/\r/' >"$tmp/crlf.en"
if $(train_on crlf "$tmp/crlf.zh" "$tmp/crlf.en") --set train.max_steps=2 >/dev/null 2>&1; then ok; else
  bad "a CRLF corpus with a BOM was rejected"; fi

# ---- A trained checkpoint to break.
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=3 --set train.checkpoint_dir="$tmp/run" >/dev/null 2>&1 ||
  bad "tiny training"
{ for i in $(seq 70); do echo 我爱水课; done; printf 'bad \xc3\x28 line\n'; echo 他喜欢猫; } >"$tmp/in.zh"
expect 2 "in.zh:71: not valid UTF-8 \\(byte 5\\); 64 lines were translated before it \\(.*out.en not written\\)" -- \
  "$nmt" translate --checkpoint "$tmp/run" --input "$tmp/in.zh" --output "$tmp/out.en" --batch-size 1
[ -e "$tmp/out.en" ] && bad "a half-written --output" || ok
expect 1 "/nonexistent/out.en: cannot write: No such file or directory" -- \
  "$nmt" translate --checkpoint "$tmp/run" --input "$tmp/a.zh" --output /nonexistent/out.en
# A damaged weights file, where a command reads it: translating reads
# model.safetensors, exporting (LibTorch) model.pt.
cp -r "$tmp/run/last" "$tmp/cut"
truncate -s -100 "$tmp/cut/model.safetensors"
expect 2 "cut/model.safetensors: [0-9]+ bytes, the manifest says [0-9]+ \\(truncated or replaced\\)" -- "$nmt" translate --checkpoint "$tmp/cut"
cp -r "$tmp/run/last" "$tmp/cutpt"
truncate -s -100 "$tmp/cutpt/model.pt"
expect 2 "cutpt/model.pt: [0-9]+ bytes, the manifest says [0-9]+ \\(truncated or replaced\\)" -- "$nmt" export --checkpoint "$tmp/cutpt" --output "$tmp/cutpt_export"
# A checkpoint saved before model.safetensors (model.pt alone in its
# manifest): translated through LibTorch with a note naming `nmt convert`,
# which adds the file (once; a second run changes nothing), after which it
# translates the same without the note.
cp -r "$tmp/run/last" "$tmp/old"
rm "$tmp/old/model.safetensors"
{ echo "nmt checkpoint manifest 1"
  for f in model.pt state.yaml config.yaml src.model tgt.model; do
    echo "$(sha256sum "$tmp/old/$f" | cut -d' ' -f1) $(stat -c %s "$tmp/old/$f") $f"
  done; } >"$tmp/old/manifest.txt"
"$nmt" translate --checkpoint "$tmp/old" --input "$tmp/a.zh" --output "$tmp/old1.en" 2>"$tmp/old1.log" &&
  grep -q "predates model.safetensors; \`nmt convert $tmp/old\` adds it" "$tmp/old1.log" && ok ||
  bad "an old checkpoint: $(tail -2 "$tmp/old1.log")"
"$nmt" convert --checkpoint "$tmp/old" 2>"$tmp/convert.log" && grep -q "model.safetensors added" "$tmp/convert.log" &&
  [ -f "$tmp/old/model.safetensors" ] && grep -q " model.safetensors$" "$tmp/old/manifest.txt" && ok ||
  bad "nmt convert: $(tail -2 "$tmp/convert.log")"
"$nmt" convert --checkpoint "$tmp/old" 2>"$tmp/convert2.log" && grep -q "has model.safetensors already" "$tmp/convert2.log" &&
  ok || bad "nmt convert twice: $(tail -2 "$tmp/convert2.log")"
"$nmt" translate --checkpoint "$tmp/old" --input "$tmp/a.zh" --output "$tmp/old2.en" 2>"$tmp/old2.log" &&
  ! grep -q "predates" "$tmp/old2.log" && cmp -s "$tmp/old1.en" "$tmp/old2.en" && ok ||
  bad "a converted checkpoint translates otherwise: $(tail -2 "$tmp/old2.log")"
"$nmt" convert --checkpoint "$tmp/run" 2>"$tmp/convert3.log" && grep -qE "0 of [12] checkpoints converted" "$tmp/convert3.log" &&
  ok || bad "nmt convert of a run: $(tail -2 "$tmp/convert3.log")"
expect 2 "nowhere: no such checkpoint folder" -- "$nmt" convert --checkpoint "$tmp/nowhere"
expect 2 "cut/model.safetensors: [0-9]+ bytes" -- "$nmt" convert --checkpoint "$tmp/cut"
cp -r "$tmp/run/last" "$tmp/edited"
sed -i 's/step: 3/step: 4/' "$tmp/edited/state.yaml"
expect 2 "edited/state.yaml: content differs from the manifest's checksum" -- "$nmt" train --resume "$tmp/edited"
cp -r "$tmp/run/last" "$tmp/nomanifest"; rm "$tmp/nomanifest/manifest.txt"
expect 2 "not a checkpoint|manifest.txt: missing" -- "$nmt" translate --checkpoint "$tmp/nomanifest"

# ---- decode.beam and decode.length_penalty are the checkpoint's defaults:
# the same training (decode keys do not touch it) with them set translates as
# the plain run does with --beam 3 --length-penalty 0.6, and --beam 0 wins.
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=3 --set train.checkpoint_dir="$tmp/run_beam" \
  --set decode.beam=3 --set decode.length_penalty=0.6 >/dev/null 2>&1 || bad "tiny training with decode.beam"
tr_() { "$nmt" translate --input "$tmp/a.zh" --checkpoint "$@" 2>/dev/null; }
if [ "$(tr_ "$tmp/run_beam")" = "$(tr_ "$tmp/run" --beam 3 --length-penalty 0.6)" ] &&
   [ "$(tr_ "$tmp/run_beam" --beam 0)" = "$(tr_ "$tmp/run")" ] && [ -n "$(tr_ "$tmp/run")" ]
then ok; else bad "decode.beam 3 in the checkpoint's config is not --beam 3 (or --beam 0 does not override it)"; fi

# ---- Weight averaging: a moving average and kept saves, averaged into a
# checkpoint that translates; checkpoints of another shape refused in one
# line, with nothing written.
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=6 --set train.eval_every=2 --set train.keep_last=2 \
  --set train.ema_decay=0.9 --set train.checkpoint_dir="$tmp/kept" >/dev/null 2>&1 || bad "training with keep_last"
if [ "$(cd "$tmp/kept" && echo step-*)" = "step-4 step-6" ]; then ok; else bad "keep_last 2 kept: $(ls "$tmp/kept")"; fi
if "$nmt" average --checkpoints "$tmp"/kept/step-* "$tmp/run" --output "$tmp/avg" 2>"$tmp/avg.log" &&
   "$nmt" translate --checkpoint "$tmp/avg" --input "$tmp/a.zh" --output "$tmp/avg.en" 2>>"$tmp/avg.log" &&
   [ "$(wc -l <"$tmp/avg.en")" -eq 100 ]; then ok; else bad "average, then translate: $(tail -2 "$tmp/avg.log")"; fi
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=1 --set model.ff_dim=32 \
  --set train.checkpoint_dir="$tmp/narrow" >/dev/null 2>&1 || bad "training a narrower model"
expect 2 "narrow/(best|last)/model.pt: parameter encoder_layers.0.ff1.weight has shape \\[32, 32\\], .*/run/(best|last)/model.pt has \\[32, 64\\]" -- \
  "$nmt" average --checkpoints "$tmp/run" "$tmp/narrow" --output "$tmp/avg_bad"
[ -e "$tmp/avg_bad" ] || [ -e "$tmp/avg_bad.tmp" ] && bad "a refused average left an output" || ok
expect 2 "avg: exists; choose another --output or pass --overwrite" -- \
  "$nmt" average --checkpoints "$tmp/run" "$tmp/kept/step-6" --output "$tmp/avg"

# ---- Fine-tuning (train.init_from): a run starts from the checkpoint's
# weights and tokenizers; a model shape or tokenizer setting that is not the
# checkpoint's, or a checkpoint that is not there, stops it (and nmt prepare)
# in a second with one line naming the key. tie_all without one vocabulary
# is a config error.
init() { echo "$nmt train --config $tmp/tiny.yaml --set train.checkpoint_dir=$tmp/ft_$1 --set train.init_from=$tmp/run"; }
expect_fast 2 "--set model.d_model=64: model.d_model: 64 in the config, 32 in $tmp/run/(best|last) \\(train.init_from" -- \
  $(init shape) --set model.d_model=64
expect_fast 2 "tokenizer.src_vocab_size: 900 in the config, 800 in $tmp/run/" -- $(init vocab) --set tokenizer.src_vocab_size=900
expect_fast 2 "model.tie_all: true in the config, false in $tmp/run/" -- $(init tie) --set tokenizer.shared=true --set model.tie_all=true
expect_fast 2 "train.init_from: .*nowhere" -- $(init nowhere) --set train.init_from="$tmp/nowhere"
cp -r "$tmp/run" "$tmp/own"  # --overwrite would have removed what the run starts from
expect_fast 2 "train.init_from: $tmp/own/last is a checkpoint of this run's folder" -- \
  "$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/own" --set train.init_from="$tmp/own/last" --overwrite
[ -e "$tmp/own/last/model.pt" ] && ok || bad "train.init_from in its own run folder: the checkpoint was removed"
expect_fast 2 "model.encoder_layers: 2 in the config, 1 in $tmp/run/" -- \
  "$nmt" prepare --config "$tmp/tiny.yaml" --set train.init_from="$tmp/run" --set model.encoder_layers=2
[ -e "$tmp/ft_shape" ] || [ -e "$tmp/ft_vocab" ] && bad "a refused init_from left a run folder: $(ls "$tmp/ft_shape")" || ok
if $(init ok) --set train.max_steps=2 --set model.dropout=0.3 >"$tmp/ft.log" 2>&1 &&
   grep -q "train: starting from the weights and tokenizers of $tmp/run/" "$tmp/ft.log" &&
   cmp -s "$tmp/ft_ok/last/src.model" "$tmp/run/last/src.model" && cmp -s "$tmp/ft_ok/last/tgt.model" "$tmp/run/last/tgt.model" &&
   grep -q "^step: 2$" "$tmp/ft_ok/last/state.yaml"
then ok; else bad "init_from: $(tail -2 "$tmp/ft.log")"; fi
printf 'model:\n  tie_all: true\n' >"$tmp/tie_all.yaml"
expect_fast 2 "tie_all.yaml:2: model.tie_all: true ties the source and target embeddings: it needs one vocabulary \\(tokenizer.shared: true\\)" -- \
  "$nmt" train --config "$tmp/tie_all.yaml"
expect_fast 2 "--set model.tie_all=true: model.tie_all: true ties the source and target embeddings" -- \
  "$nmt" train --config "$tmp/tiny.yaml" --set model.tie_all=true

# ---- --compute-type: bad values in one line; int8 on a CPU without VNNI
# (NMT_CPU_ISA lowers it) runs the AVX2 and plain C++ kernels and says so.
expect 2 "--compute-type: int4 not in" -- "$nmt" translate --checkpoint "$tmp/run" --compute-type int4
expect 2 "decode.compute_type: 'fp8' is not one of" -- "$nmt" train --config "$tmp/tiny.yaml" --set decode.compute_type=fp8
for isa in generic avx2; do
  if [ "$isa" = avx2 ] && ! grep -qw avx2 /proc/cpuinfo; then continue; fi
  if NMT_CPU_ISA=$isa "$nmt" translate --checkpoint "$tmp/run" --input "$tmp/a.zh" --output "$tmp/int8_$isa.en" \
       --compute-type int8 2>"$tmp/int8_$isa.log" &&
     [ "$(wc -l <"$tmp/int8_$isa.en")" -eq 100 ] &&
     grep -q "CPU runtime: int8, flash attention, $isa kernels" "$tmp/int8_$isa.log"; then ok
  else bad "--compute-type int8 with NMT_CPU_ISA=$isa: $(tail -2 "$tmp/int8_$isa.log")"; fi
done
for ct in bf16 auto; do
  if "$nmt" evaluate --checkpoint "$tmp/run" --src "$tmp/a.zh" --ref "$tmp/a.zh" --compute-type $ct >/dev/null 2>"$tmp/ct.log" &&
     grep -qE "decoding: CPU runtime: (bf16|int8|float32)" "$tmp/ct.log"; then ok; else bad "evaluate --compute-type $ct: $(tail -2 "$tmp/ct.log")"; fi
done

# ---- bf16 where the kernels in use lack AVX512-BF16 (NMT_CPU_ISA=avx2 lowers
# them on any CPU): refused in one line naming the key, before the resolved
# config is printed (a page of it used to come first).
if grep -qw avx2 /proc/cpuinfo; then
  NMT_CPU_ISA=avx2 "$nmt" train --config "$tmp/tiny.yaml" --set train.precision=bf16 --set train.checkpoint_dir="$tmp/bf16run" \
    >"$tmp/bf16.out" 2>"$tmp/bf16.log"
  rc=$?
  if [ $rc = 2 ] && [ "$(wc -l <"$tmp/bf16.log")" = 1 ] && [ ! -s "$tmp/bf16.out" ] &&
     grep -qE "^nmt: error: --set train.precision=bf16: train.precision: bf16 needs (a CPU with AVX512-BF16|the AVX-512 kernels, and NMT_CPU_ISA=avx2 picks others)" "$tmp/bf16.log"; then ok
  else bad "bf16 refused: exit $rc, $(wc -l <"$tmp/bf16.log") lines: $(head -c 300 "$tmp/bf16.log")"; fi
fi

# ---- A model that does not protect placeholders loses them: translate and
# evaluate warn, once, naming the line and what it lost.
printf '我爱水课\n文件 %%s 不存在\n' >"$tmp/ph.zh"
"$nmt" translate --checkpoint "$tmp/run" --input "$tmp/ph.zh" --output "$tmp/ph.out" 2>"$tmp/ph.log"
if [ "$(grep -c 'lost placeholders' "$tmp/ph.log")" = 1 ] &&
   grep -q "translate: 1 of 2 translations lost placeholders of their source, .*: line 2 (%s); this model does not protect placeholders" "$tmp/ph.log"
then ok; else bad "translate, a lost placeholder: $(grep -i placeholder "$tmp/ph.log")"; fi
"$nmt" evaluate --checkpoint "$tmp/run" --src "$tmp/ph.zh" --ref "$tmp/ph.zh" >/dev/null 2>"$tmp/ph.log"
grep -q "evaluate: $tmp/ph.zh: 1 of 2 translations lost placeholders" "$tmp/ph.log" && ok ||
  bad "evaluate, a lost placeholder: $(grep -i placeholder "$tmp/ph.log")"

# ---- What stops a run as it starts comes as its one error line, and the
# resolved config only after the run's inputs are checked (an 85-line page of
# it used to come first): a checkpoint to start from that is not there, a
# training file that is not there, a folder that holds a run.
for refusal in "train.init_from=$tmp/nope|train.init_from" "data.train_src=$tmp/nope.zh|$tmp/nope.zh: cannot open" \
               "train.checkpoint_dir=$tmp/run|$tmp/run: already holds checkpoints"; do
  set_arg=${refusal%%|*} expected=${refusal#*|}
  "$nmt" train --config "$tmp/tiny.yaml" --set "$set_arg" >"$tmp/refused.out" 2>"$tmp/refused.log"
  rc=$?
  if [ $rc = 2 ] && [ "$(wc -l <"$tmp/refused.log")" = 1 ] && [ ! -s "$tmp/refused.out" ] &&
     grep -q "^nmt: error: .*$expected" "$tmp/refused.log"; then ok
  else bad "train --set $set_arg: exit $rc, $(wc -l <"$tmp/refused.log") lines: $(head -c 300 "$tmp/refused.log")"; fi
done

# ---- A source longer than the model reads (256 tokens): cut to its first 256
# and translated, with a warning naming the line, in every entry point
# (translate, its attention map, evaluate; check-po and the service have
# their own tests).
long=$(for i in $(seq 60); do printf '我爱水课他喜欢猫'; done)
printf '我爱水课\n%s\n他喜欢猫\n' "$long" >"$tmp/long.zh"
printf 'a\nb\nc\n' >"$tmp/long.en"
if "$nmt" translate --checkpoint "$tmp/run" --input "$tmp/long.zh" --output "$tmp/long.out" 2>"$tmp/long.log" &&
   [ "$(wc -l <"$tmp/long.out")" -eq 3 ] &&
   grep -qE "translate: 1 source longer than the 256 tokens this model reads was cut to the first 256: line 2 \([0-9]+ tokens\)" "$tmp/long.log"
then ok; else bad "translate, an over-long line: $(tail -2 "$tmp/long.log")"; fi
sed -n 2p "$tmp/long.zh" >"$tmp/long1.zh"
if "$nmt" translate --checkpoint "$tmp/run" --input "$tmp/long1.zh" --attention-map "$tmp/long.svg" >/dev/null 2>"$tmp/map.log" &&
   grep -q "source cut to 256 of [0-9]* tokens" "$tmp/long.svg"; then ok
else bad "translate --attention-map, an over-long line: $(tail -2 "$tmp/map.log")"; fi
if "$nmt" evaluate --checkpoint "$tmp/run" --src "$tmp/long.zh" --ref "$tmp/long.en" >/dev/null 2>"$tmp/eval.log" &&
   grep -qE "evaluate: .*long.zh: 1 source longer than the 256 tokens .*: line 2 " "$tmp/eval.log"; then ok
else bad "evaluate, an over-long line: $(tail -2 "$tmp/eval.log")"; fi

# ---- A non-finite gradient: stop naming the step, last/ untouched; or skip it when allowed.
expect 1 "training diverged: the gradient at step 5 is not finite" -- env NMT_TEST_NONFINITE_AT=5 \
  "$nmt" train --resume "$tmp/run" --set train.max_steps=8
if [ "$(sed -n 's/^step: //p' "$tmp/run/last/state.yaml")" = 3 ]; then ok; else
  bad "the checkpoint moved after a failed run"; fi
if NMT_TEST_NONFINITE_AT=5 "$nmt" train --resume "$tmp/run" --set train.max_steps=8 --set train.skip_nonfinite_steps=1 \
  >"$tmp/skip.log" 2>&1 && grep -q "step 5: gradient not finite, update skipped (1 of at most 1)" "$tmp/skip.log"; then
  ok; else bad "skip_nonfinite_steps: $(tail -2 "$tmp/skip.log")"; fi
# precision auto keeps what the run it resumes trained in (state.yaml records
# it): measuring again could pick the other and change the arithmetic mid-run.
if grep -qx "precision: float32" "$tmp/run/last/state.yaml" &&
   "$nmt" train --resume "$tmp/run" --set train.max_steps=9 --set train.precision=auto >"$tmp/keep.log" 2>&1 &&
   grep -q "matrix multiplies in float32 (precision auto: as the run it resumes trained)" "$tmp/keep.log" &&
   grep -qx "precision: float32" "$tmp/run/last/state.yaml"; then ok
else bad "precision auto on resume: $(grep -h 'precision' "$tmp/run/last/state.yaml" "$tmp/keep.log" | head -3)"; fi

# --help lists every subcommand and flag, with the defaults, exit 0.
if "$nmt" --help | grep -q translate && "$nmt" train --help | grep -q -- --attention &&
   "$nmt" serve --help | grep -qE -- "--port INT:0..65535=8080" && "$nmt" translate --help | grep -qE -- "--beam INT:0..64 .*default: the config.s decode.beam"; then
  ok
else
  bad "--help"
fi
# Flags show as typed: no "--no-hints{false}" (CLI11's way of showing a negated flag).
for c in train prepare translate evaluate score check-causality check-po export serve bench-attention; do
  if "$nmt" $c --help | grep -q '{false}\|{true}'; then bad "$c --help: $("$nmt" $c --help | grep '{false}\|{true}')"; else ok; fi
done
"$nmt" check-po --help | grep -qE -- '^ *--no-hints +leave out the hints' && ok || bad "check-po --help lacks --no-hints"

# The resolved config's numbers as written (0.1), not as a double prints
# with 17 digits (0.10000000000000001).
if "$nmt" train --config "$tmp/tiny.yaml" --profile 1 --set train.checkpoint_dir="$tmp/profile" >/dev/null 2>"$tmp/resolved.log" &&
   grep -qE '^  dropout: 0.1$' "$tmp/resolved.log" && grep -qE '^  label_smoothing: 0.1$' "$tmp/resolved.log" &&
   ! grep -qE '[0-9]\.[0-9]*0000000000[0-9]' "$tmp/resolved.log"; then ok
else bad "the resolved config: $(grep -E 'dropout|label_smoothing|0000000000' "$tmp/resolved.log")"; fi

# --profile times the same batches with and without the profiler (a batch's
# shapes set its time): the two runs' token counts agree, over batches of
# more than one size.
if "$nmt" train --config "$tmp/tiny.yaml" --profile 3 --set train.checkpoint_dir="$tmp/profile_batches" \
     >"$tmp/profile.txt" 2>/dev/null; then
  plain=$(sed -n 's/^without the profiler: .* (\([0-9]*\) tokens)$/\1/p' "$tmp/profile.txt")
  profiled=$(sed -n 's/^with the profiler: .* (\([0-9]*\) tokens)$/\1/p' "$tmp/profile.txt")
  if [ -n "$plain" ] && [ "$plain" = "$profiled" ]; then ok
  else bad "--profile: $plain tokens without the profiler, $profiled with it"; fi
else bad "--profile 3 failed: $(tail -2 "$tmp/profile.txt")"; fi

# ---- The live progress line (on a terminal): step, the last window's loss,
# tokens/s, elapsed time and what is left of the budget; and a resumed run's
# summary in one unit: the run's steps with the run's time, the session apart.
if /usr/bin/python3 - "$nmt" "$tmp/tiny.yaml" "$tmp/progress" >"$tmp/progress.txt" <<'PY'
import os, pty, re, select, subprocess, sys, time
nmt, config, run = sys.argv[1:]
leader, follower = pty.openpty()  # stderr a terminal: the progress line is drawn
# The line is redrawn at most every 200 ms, and 60 tiny steps can take less
# than that after the first: the run is held after step 10 (two windows
# logged, so the loss is known) for longer than that, and step 11 draws.
hold = run + ".hold"
env = dict(os.environ, NMT_TEST_HOLD="train-step@10:" + hold)
p = subprocess.Popen([nmt, "train", "--config", config, "--set", "train.checkpoint_dir=" + run, "--set", "train.progress=true",
                      "--set", "train.max_steps=60", "--set", "train.log_every=5"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, env=env)
os.close(follower)
out, released = b"", False
while True:
    if select.select([leader], [], [], 0.05)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    if not released and os.path.exists(hold):
        time.sleep(0.3)
        os.remove(hold)
        released = True
p.wait()
text = out.decode("utf-8", "replace")
lines = [l for l in re.split(r"\r|\n", text.replace("\x1b[K", "")) if l.startswith("  step ")]
print("\n".join(lines[-3:]))
want = re.compile(r"^  step \d+/60  loss \d+\.\d{3}  \d+ tok/s  elapsed \d+:\d\d  left ~\d+:\d\d \(\d+ steps\)$")
sys.exit(0 if p.returncode == 0 and any(want.match(l) for l in lines) else 1)
PY
then ok; else bad "no progress line with loss, elapsed and time left: $(tail -c 400 "$tmp/progress.txt")"; fi
"$nmt" train --resume "$tmp/progress" --set train.max_steps=90 >"$tmp/resumed.log" 2>&1 || bad "resume: $(tail -2 "$tmp/resumed.log")"
summary_line=$(grep "train: 90 steps in" "$tmp/resumed.log")
run_s=$(sed -n 's/.*train: 90 steps in \([0-9.]*\) s of training in all, this session: steps 61 to 90 (30) in [0-9.]* s, .*/\1/p' <<<"$summary_line")
session_s=$(sed -n 's/.*this session: steps 61 to 90 (30) in \([0-9.]*\) s, .*/\1/p' <<<"$summary_line")
saved_s=$(sed -n 's/^train_seconds: //p' "$tmp/progress/last/state.yaml")
if [ -n "$run_s" ] && awk -v r="$run_s" -v s="$session_s" -v t="$saved_s" 'BEGIN { exit !(r > s && r >= t - 0.5 && r <= t + 5) }'; then ok
else bad "the resumed run's summary: '$summary_line' (the run's training time in state.yaml: $saved_s s)"; fi

# A mistyped command is named, with the ones there are.
expect 2 "unknown command 'translat' \\(commands: train, prepare, translate, .*\\)" -- "$nmt" translat --checkpoint x

# --version: the whole build description (a device count printed as a char
# once cut it short), exit 0.
if "$nmt" --version >"$tmp/version.txt" && grep -q '^LibTorch [0-9]' "$tmp/version.txt" &&
   grep -q '^CUDA: ' "$tmp/version.txt" && grep -q '^CPU kernels: .*this CPU: ' "$tmp/version.txt"; then
  ok
else
  bad "--version: $(cat "$tmp/version.txt")"
fi

# OpenBLAS's kernels: on a CPU with AVX2 or AVX-512, never its generic
# pre-AVX2 ones (it falls back to Prescott's on CPU models newer than it
# knows, and nmt names the fitting ones); a user's OPENBLAS_CORETYPE wins.
generic='(Unknown|Katmai|Coppermine|Northwood|Prescott|Banias|Atom|Core2|Penryn|Dunnington|Nehalem|Athlon|Opteron|Opteron_SSE3|Barcelona|Nano|Bobcat|Sandybridge|Bulldozer|Piledriver|Steamroller) kernels'
if grep -q '^BLAS: OpenBLAS' "$tmp/version.txt" && grep -qE 'this CPU: avx(2|512)' "$tmp/version.txt"; then
  if grep -qE "^BLAS: OpenBLAS.*, $generic" "$tmp/version.txt"; then bad "generic OpenBLAS kernels: $(grep '^BLAS' "$tmp/version.txt")"; else ok; fi
  theirs=$(env -u NMT_THREAD_POOLS_SET OPENBLAS_CORETYPE=Prescott "$nmt" --version | grep '^BLAS')
  if grep -qE "$generic \(generic kernels on a CPU that runs its (Haswell|SkylakeX) kernels" <<<"$theirs"; then ok
  else bad "OPENBLAS_CORETYPE=Prescott: '$theirs'"; fi
fi

summary cli
