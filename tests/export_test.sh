#!/usr/bin/env bash
# `nmt export --format ctranslate2` on tiny models trained here (tied and
# separate output embeddings, one shared vocabulary with model.tie_all,
# post-LayerNorm blocks, and placeholder protection).
#   export_test.sh NMT SRC            the folder's files and model.bin's
#                                     header; bad input exits 2 and leaves
#                                     nothing behind; --overwrite replaces.
#   export_test.sh NMT SRC --roundtrip LOGPROBS
#                                     CTranslate2 loads each export as it is,
#                                     translates 100 test lines exactly as
#                                     `nmt translate` does (greedy, beam 4) and
#                                     scores them as the model does (LOGPROBS:
#                                     tests/teacher_forced_logprobs.cpp).
#                                     Needs the light peers environment
#                                     (bench/peers_env.sh --light; scripts/test.sh
#                                     makes it); exits 77 (skipped) without it.
set -u
nmt=$1
src=$2
mode=${3:-}
logprobs=${4:-}
. "$(dirname "$0")/lib.sh"

if [ "$mode" = --roundtrip ]; then
  py=$("$src/bench/peers_env.sh" --light --check 2>/dev/null) ||
    { echo "SKIP: no CTranslate2 here (run bench/peers_env.sh --light)"; exit 77; }
fi

make_temp_dir
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
for tie in true false; do
  "$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/run_$tie" \
    --set model.tie_embeddings=$tie >"$tmp/train_$tie.log" 2>&1 || { bad "train (tie $tie): $(tail -2 "$tmp/train_$tie.log")"; }
  "$nmt" export --checkpoint "$tmp/run_$tie" --format ctranslate2 --output "$tmp/ct2_$tie" \
    >"$tmp/export_$tie.log" 2>&1 || bad "export (tie $tie): $(tail -2 "$tmp/export_$tie.log")"
done
# One shared vocabulary and one embedding matrix for both sides and the
# output (tokenizer.joint, model.tie_all).
"$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/run_shared" \
  --set tokenizer.joint=true --set model.tie_all=true --set train.max_steps=200 --set train.lr=0.003 \
  >"$tmp/train_shared.log" 2>&1 || bad "train (shared): $(tail -2 "$tmp/train_shared.log")"
"$nmt" export --checkpoint "$tmp/run_shared" --format ctranslate2 --output "$tmp/ct2_shared" \
  >"$tmp/export_shared.log" 2>&1 || bad "export (shared): $(tail -2 "$tmp/export_shared.log")"
# Post-LayerNorm blocks (model.norm: post): exported with pre_norm false and
# no final norms, which CTranslate2 applies its own way.
"$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/run_post" --set model.norm=post \
  >"$tmp/train_post.log" 2>&1 || bad "train (post): $(tail -2 "$tmp/train_post.log")"
"$nmt" export --checkpoint "$tmp/run_post" --format ctranslate2 --output "$tmp/ct2_post" \
  >"$tmp/export_post.log" 2>&1 || bad "export (post): $(tail -2 "$tmp/export_post.log")"
# A placeholder-protected model, trained long enough (800 steps, seconds) on
# messages with placeholders to place sentinels in its translations.
/usr/bin/python3 - "$src/data/real" "$tmp" <<'PY'
import sys
d, out = sys.argv[1:3]
for split, n in (("train", 3000), ("valid", 100), ("test", 100)):
    zh = open(f"{d}/{split}.zh", encoding="utf-8").read().split("\n")
    en = open(f"{d}/{split}.en", encoding="utf-8").read().split("\n")
    pairs = [(a, b) for a, b in zip(zh, en) if "%" in a or "<" in a or "{" in a][:n]
    for lang, column in (("zh", [a for a, _ in pairs]), ("en", [b for _, b in pairs])):
        open(f"{out}/ph_{split}.{lang}", "w", encoding="utf-8").write("".join(l + "\n" for l in column))
PY
"$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/run_protected" \
  --set tokenizer.protect_placeholders=true --set tokenizer.src_vocab_size=1500 --set tokenizer.tgt_vocab_size=1000 \
  --set data.train_src="$tmp/ph_train.zh" --set data.train_tgt="$tmp/ph_train.en" \
  --set data.valid_src="$tmp/ph_valid.zh" --set data.valid_tgt="$tmp/ph_valid.en" \
  --set train.max_steps=800 --set train.warmup_steps=100 --set train.lr=0.003 >"$tmp/train_protected.log" 2>&1 ||
  bad "train (protected): $(tail -2 "$tmp/train_protected.log")"
"$nmt" export --checkpoint "$tmp/run_protected" --format ctranslate2 --output "$tmp/ct2_protected" \
  >"$tmp/export_protected.log" 2>&1 || bad "export (protected): $(tail -2 "$tmp/export_protected.log")"

if [ "$mode" = --roundtrip ]; then
  head -100 "$src/data/toy/test.zh" >"$tmp/src_true.zh"
  cp "$tmp/src_true.zh" "$tmp/src_false.zh"
  cp "$tmp/src_true.zh" "$tmp/src_shared.zh"
  cp "$tmp/src_true.zh" "$tmp/src_post.zh"
  cp "$tmp/ph_test.zh" "$tmp/src_protected.zh"
  max_len=64
  for model in true false shared protected post; do
    extra=()
    [ $model = protected ] && extra=(--no-placeholder-constraint)
    for beam in 0 4; do
      "$nmt" translate --checkpoint "$tmp/run_$model" --input "$tmp/src_$model.zh" \
        --output "$tmp/nmt_${model}_$beam.en" "${extra[@]}" \
        --beam $beam --max-len $max_len --max-len-factor 0 --threads 1 2>"$tmp/translate.log" ||
        bad "translate: $(tail -1 "$tmp/translate.log")"
    done
    "$logprobs" "$tmp/run_$model" "$tmp/src_$model.zh" "$tmp/nmt_${model}_0.en" >"$tmp/logp_$model.txt" ||
      bad "teacher_forced_logprobs failed"
    case $model in
      protected) echo "placeholder-protected model" ;;
      shared) echo "one vocabulary, one embedding matrix (model.tie_all)" ;;
      post) echo "post-LayerNorm blocks (model.norm: post)" ;;
      *) echo "tied output embeddings: $model" ;;
    esac
    if "$py" "$(dirname "$0")/ctranslate2_roundtrip.py" "$tmp/ct2_$model" "$tmp/src_$model.zh" \
         "$tmp/nmt_${model}_0.en" "$tmp/nmt_${model}_4.en" $max_len "$tmp/logp_$model.txt"; then ok
    else bad "CTranslate2 translates the export ($model) differently"; fi
  done
  echo "export round trip: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
  exit
fi

# The folder: what CTranslate2 reads, and the tokenizers.
for f in model.bin config.json source_vocabulary.json target_vocabulary.json src.model tgt.model; do
  [ -s "$tmp/ct2_true/$f" ] && ok || bad "export: $f missing or empty"
done
cmp -s "$tmp/ct2_true/src.model" "$tmp/run_true/best/src.model" && ok || bad "export: src.model differs from the checkpoint's"
# model.bin: binary version 6, spec TransformerSpec revision 7; tied
# embeddings stored once and aliased, separate ones stored twice.
header() { /usr/bin/python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
version, = struct.unpack_from("<I", b, 0)
n, = struct.unpack_from("<H", b, 4)
name = b[6:6 + n - 1].decode()
revision, = struct.unpack_from("<I", b, 6 + n)
print(version, name, revision)
PY
}
[ "$(header "$tmp/ct2_true/model.bin")" = "6 TransformerSpec 7" ] && ok || bad "model.bin header: $(header "$tmp/ct2_true/model.bin")"
grep -q "(1 aliased)" "$tmp/export_true.log" && ok || bad "tied export: $(tail -1 "$tmp/export_true.log")"
grep -q "(0 aliased)" "$tmp/export_false.log" && ok || bad "untied export: $(tail -1 "$tmp/export_false.log")"
grep -q '"decoder_start_token": "<start>"' "$tmp/ct2_true/config.json" && ok || bad "config.json: $(tr -d '\n' <"$tmp/ct2_true/config.json")"
# One vocabulary: written once, as CTranslate2's shared_vocabulary.json; the
# one embedding matrix stored once and named three times.
[ -s "$tmp/ct2_shared/shared_vocabulary.json" ] && [ ! -e "$tmp/ct2_shared/source_vocabulary.json" ] &&
  [ ! -e "$tmp/ct2_shared/target_vocabulary.json" ] && [ ! -e "$tmp/ct2_true/shared_vocabulary.json" ] &&
  ok || bad "shared export: $(ls "$tmp/ct2_shared" | tr '\n' ' ')"
grep -q "(2 aliased)" "$tmp/export_shared.log" && ok || bad "tie_all export: $(tail -1 "$tmp/export_shared.log")"
# A protected model's export carries its placeholder helper, and says so; another's does not.
[ -s "$tmp/ct2_protected/placeholders.py" ] && grep -q '"placeholder_protection": true' "$tmp/ct2_protected/nmt_export.json" &&
  ok || bad "protected export: $(ls "$tmp/ct2_protected" | tr '\n' ' ')"
cmp -s "$tmp/ct2_protected/placeholders.py" "$src/src/export/placeholders.py" && ok || bad "placeholders.py differs from the source's"
[ ! -e "$tmp/ct2_true/placeholders.py" ] && grep -q '"placeholder_protection": false' "$tmp/ct2_true/nmt_export.json" &&
  ok || bad "unprotected export: $(ls "$tmp/ct2_true" | tr '\n' ' ')"
# The helper masks and restores with the standard library alone.
/usr/bin/python3 - "$tmp/ct2_protected" <<'PY' && ok || bad "placeholders.py as a module"
import sys
sys.path.insert(0, sys.argv[1])
import placeholders as p
m = p.mask("%2$s 的 %1$lu <b>")
assert p.restore(p.sentinel(1) + " of " + p.sentinel(2) + p.sentinel(3), m) == "%lu of %s<b>", m
assert p.missing(p.sentinel(2), m) == ["%1$lu", "<b>"], p.missing(p.sentinel(2), m)
PY
out=$(/usr/bin/python3 "$tmp/ct2_protected/placeholders.py" frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == *"unknown command 'frobnicate'"* ]] && ok || bad "placeholders.py frobnicate: exit $rc: $out"

# Bad input: exit 2, one line naming what is wrong, nothing left behind.
expect2() {  # LABEL PATTERN ARGS...
  local label=$1 pattern=$2 out rc
  shift 2
  out=$("$nmt" export "$@" 2>&1); rc=$?
  if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | grep -c '^nmt: error')" -eq 1 ] &&
     [[ $out == *"$pattern"* ]]; then ok
  else bad "$label: exit $rc: $out"; fi
  echo "$label -> exit $rc: $(printf '%s\n' "$out" | grep '^nmt: ')"
}
before=$(ls "$tmp")
expect2 "existing output" "exists; choose another --output or pass --overwrite" \
  --checkpoint "$tmp/run_true" --output "$tmp/ct2_true"
expect2 "no checkpoint" "$tmp/nowhere" --checkpoint "$tmp/nowhere" --output "$tmp/out1"
expect2 "unknown format" "--format" --checkpoint "$tmp/run_true" --format onnx --output "$tmp/out2"
expect2 "missing parent" "does not exist" --checkpoint "$tmp/run_true" --output "$tmp/no/such/dir"
echo x >"$tmp/a_file"
before="$before
a_file"
expect2 "output is a file" "is not a folder" --checkpoint "$tmp/run_true" --output "$tmp/a_file" --overwrite
[ "$(ls "$tmp")" = "$(printf '%s\n' $before | sort)" ] && ok || bad "bad exports left files: $(ls "$tmp" | tr '\n' ' ')"

# --overwrite replaces an earlier export (it holds nmt_export.json) as a whole.
grep -q '"written_by": "nmt export"' "$tmp/ct2_true/nmt_export.json" && ok || bad "export: no nmt_export.json marker"
cp -r "$tmp/ct2_true" "$tmp/ct2_earlier"
"$nmt" export --checkpoint "$tmp/run_false" --output "$tmp/ct2_earlier" --overwrite >"$tmp/over.log" 2>&1 &&
  cmp -s "$tmp/ct2_earlier/model.bin" "$tmp/ct2_false/model.bin" && ok ||
  bad "--overwrite of an earlier export: $(tail -1 "$tmp/over.log"); $(ls "$tmp/ct2_earlier" | tr '\n' ' ')"
[ ! -e "$tmp/ct2_earlier.export-tmp" ] && ok || bad "staging folder left behind"

# ... and nothing else: a user's folder, or an earlier export a user added a
# file to, is refused (exit 2, naming a file export did not write) and left
# exactly as it was.
snapshot() { (cd "$1" && find . -printf '%p %s %T@\n' | sort; find . -type f -exec cat {} + | md5sum); }
mkdir -p "$tmp/mine/sub"
echo "my notes" >"$tmp/mine/notes.txt"
echo "a script" >"$tmp/mine/sub/run.sh"
before_mine=$(snapshot "$tmp/mine")
expect2 "a user's folder" "$tmp/mine/notes.txt: not written by nmt export" \
  --checkpoint "$tmp/run_true" --output "$tmp/mine" --overwrite
[ "$(snapshot "$tmp/mine")" = "$before_mine" ] && ok || bad "export --overwrite changed a user's folder"
echo "keep me" >"$tmp/ct2_true/notes.txt"
before_ct2=$(snapshot "$tmp/ct2_true")
expect2 "an export holding a user's file" "$tmp/ct2_true/notes.txt: not written by nmt export" \
  --checkpoint "$tmp/run_false" --output "$tmp/ct2_true" --overwrite
[ "$(snapshot "$tmp/ct2_true")" = "$before_ct2" ] && ok || bad "export --overwrite changed an export holding a user's file"
# A folder named like export's staging folder, holding a user's file.
mkdir -p "$tmp/out3.export-tmp" && echo "mine" >"$tmp/out3.export-tmp/draft.txt"
expect2 "a user's folder where export stages" "$tmp/out3.export-tmp/draft.txt: not written by nmt" \
  --checkpoint "$tmp/run_true" --output "$tmp/out3"
[ "$(cat "$tmp/out3.export-tmp/draft.txt" 2>&1)" = mine ] && [ ! -e "$tmp/out3" ] && ok || bad "staging folder of a user's changed"
# An empty folder is taken as it is, --overwrite or not.
mkdir "$tmp/empty"
"$nmt" export --checkpoint "$tmp/run_true" --output "$tmp/empty" >"$tmp/empty.log" 2>&1 &&
  cmp -s "$tmp/empty/model.bin" "$tmp/ct2_true/model.bin" && ok || bad "export into an empty folder: $(tail -1 "$tmp/empty.log")"

echo "export: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
