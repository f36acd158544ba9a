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

# ---- Bad data, caught before any tokenizer is trained (in a second).
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
head -100 "$src/data/toy/train.zh" >"$tmp/a.zh"
head -99 "$src/data/toy/train.en" >"$tmp/a.en"
expect_fast() {  # like expect, and within 3 seconds
  local start=$(date +%s%N)
  expect "$@"
  local ms=$((($(date +%s%N) - start) / 1000000))
  [ $ms -lt 3000 ] || bad "took $ms ms: $*"
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

# CRLF line ends and a byte order mark are fine.
{ printf '\xEF\xBB\xBF'; head -300 "$src/data/toy/train.zh" | sed 's/$/\r/'; } >"$tmp/crlf.zh"
head -300 "$src/data/toy/train.en" | sed 's/$/\r/' >"$tmp/crlf.en"
if $(train_on crlf "$tmp/crlf.zh" "$tmp/crlf.en") --set train.max_steps=2 >/dev/null 2>&1; then ok; else
  bad "a CRLF corpus with a BOM was rejected"; fi

# ---- A trained checkpoint to break.
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=3 --set train.checkpoint_dir="$tmp/run" >/dev/null 2>&1 ||
  bad "tiny training"
{ for i in $(seq 19); do echo 我爱水课; done; printf 'bad \xc3\x28 line\n'; echo 他喜欢猫; } >"$tmp/in.zh"
expect 2 "in.zh:20: not valid UTF-8 \\(byte 5\\); 16 lines were translated before it \\(.*out.en not written\\)" -- \
  "$nmt" translate --checkpoint "$tmp/run" --input "$tmp/in.zh" --output "$tmp/out.en" --batch-size 1
[ -e "$tmp/out.en" ] && bad "a half-written --output" || ok
expect 1 "/nonexistent/out.en: cannot write: No such file or directory" -- \
  "$nmt" translate --checkpoint "$tmp/run" --input "$tmp/a.zh" --output /nonexistent/out.en
cp -r "$tmp/run/last" "$tmp/cut"
truncate -s -100 "$tmp/cut/model.pt"
expect 2 "cut/model.pt: [0-9]+ bytes, the manifest says [0-9]+ \\(truncated or replaced\\)" -- "$nmt" translate --checkpoint "$tmp/cut"
cp -r "$tmp/run/last" "$tmp/edited"
sed -i 's/step: 3/step: 4/' "$tmp/edited/state.yaml"
expect 2 "edited/state.yaml: content differs from the manifest's checksum" -- "$nmt" train --resume "$tmp/edited"
cp -r "$tmp/run/last" "$tmp/nomanifest"; rm "$tmp/nomanifest/manifest.txt"
expect 2 "not a checkpoint|manifest.txt: missing" -- "$nmt" translate --checkpoint "$tmp/nomanifest"

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
     grep -q "compute type int8, CPU kernels $isa" "$tmp/int8_$isa.log"; then ok
  else bad "--compute-type int8 with NMT_CPU_ISA=$isa: $(tail -2 "$tmp/int8_$isa.log")"; fi
done
for ct in bf16 auto; do
  if "$nmt" evaluate --checkpoint "$tmp/run" --src "$tmp/a.zh" --ref "$tmp/a.zh" --compute-type $ct >/dev/null 2>"$tmp/ct.log" &&
     grep -q "compute type" "$tmp/ct.log"; then ok; else bad "evaluate --compute-type $ct: $(tail -2 "$tmp/ct.log")"; fi
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

# --help lists every subcommand and flag, with the defaults, exit 0.
if "$nmt" --help | grep -q translate && "$nmt" train --help | grep -q -- --attention &&
   "$nmt" serve --help | grep -qE -- "--port INT:0..65535=8080" && "$nmt" translate --help | grep -qE -- "--beam [^ ]*=0"; then
  ok
else
  bad "--help"
fi
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

summary cli
