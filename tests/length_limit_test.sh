#!/usr/bin/env bash
# Decoding's length limit on a corpus of one's own: 50 pairs whose source
# pieces are whole words (a large source vocabulary for so little text) and
# whose target pieces are single letters (a vocabulary of 34). A limit of
# 3 × source pieces + 5 leaves most of their targets no room; the limit
# derived from the corpus's target/source length ratio (recorded when it is
# prepared, saved with the checkpoint) cuts none. Checked: the ratio in the
# prepared corpus and the checkpoint, the validation log and metrics, the
# translations of `translate` and `evaluate` and their log lines, a limit set
# by hand, a checkpoint and a prepared corpus from before the ratio was
# recorded.
# Usage: length_limit_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
. "$(dirname "$0")/lib.sh"
make_temp_dir

{ head -49 "$src/data/toy/train.zh"; echo "他们有一只狗"; } >"$tmp/c.zh"
{ head -49 "$src/data/toy/train.en"; echo "they have one dog"; } >"$tmp/c.en"
cat >"$tmp/c.yaml" <<YAML
data: {train_src: $tmp/c.zh, train_tgt: $tmp/c.en, valid_src: $tmp/c.zh, valid_tgt: $tmp/c.en, prepared_dir: $tmp/prep, max_len: 100}
tokenizer: {src_vocab_size: 400, tgt_vocab_size: 34, sample_lines: 1000}
model: {d_model: 64, heads: 4, encoder_layers: 2, decoder_layers: 2, ff_dim: 128, dropout: 0.0}
attention: {backend: flash}
train: {checkpoint_dir: $tmp/run, batch_tokens: 0, batch_sentences: 50, max_steps: 300, lr: 0.003, warmup_steps: 50, label_smoothing: 0.0, eval_every: 300, valid_bleu_sentences: 50, best_metric: bleu, log_every: 100, threads: 2, progress: false}
YAML
# Lines whose translation equals its reference.
same() { paste -d '\t' "$1" "$tmp/c.en" | awk -F '\t' '$1 == $2' | wc -l; }
# A key of the last validation in metrics.jsonl.
last_valid() { /usr/bin/python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if '\"valid_loss\"' in l][-1][sys.argv[2]])" "$tmp/run/metrics.jsonl" "$1"; }

"$nmt" train --config "$tmp/c.yaml" >"$tmp/train.log" 2>&1 || { echo "FAIL: train: $(tail -3 "$tmp/train.log")"; exit 1; }
ratio=$(/usr/bin/python3 -c "import json,glob; print('%g' % json.load(open(glob.glob('$tmp/prep/*/manifest.json')[0]))['target_source_ratio'])")
# 99.9% of the pairs (all 50) need at most (t + 1 - 5) / s = 10: a factor of 15.
if [ "$ratio" = 10 ] && grep -q "^target_source_ratio: 10$" "$tmp/run/last/state.yaml"; then ok
else bad "the corpus's ratio: manifest $ratio, checkpoint $(grep ratio "$tmp/run/last/state.yaml")"; fi
if grep -q "valid: translations' length limit: 15 × source pieces + 5 (from the training corpus's target/source length ratio 10" "$tmp/train.log" &&
  [ "$(last_valid valid_length_limited)" = 0 ]; then ok
else bad "validation: $(grep 'valid' "$tmp/train.log" | tail -2)"; fi

# translate: the derived limit cuts nothing; the memorized corpus comes back.
"$nmt" translate --checkpoint "$tmp/run" --input "$tmp/c.zh" --output "$tmp/auto.en" >"$tmp/auto.log" 2>&1 ||
  bad "translate: $(tail -2 "$tmp/auto.log")"
auto_same=$(same "$tmp/auto.en")
if grep -q "translate: 0 of 50 translations stopped at the length limit (15 × source pieces + 5, at most 80 target pieces) before ending" "$tmp/auto.log" &&
  [ "$auto_same" -ge 45 ]; then ok
else bad "translate with the derived limit: $auto_same of 50 equal their reference: $(grep -i 'limit' "$tmp/auto.log")"; fi

# The old fixed factor: most translations stop at the limit, and the log names them.
"$nmt" translate --checkpoint "$tmp/run" --input "$tmp/c.zh" --output "$tmp/f3.en" --max-len-factor 3 >"$tmp/f3.log" 2>&1 ||
  bad "translate --max-len-factor 3: $(tail -2 "$tmp/f3.log")"
limited=$(sed -n 's/.*translate: \([0-9]*\) of 50 translations stopped at the length limit (3 × source pieces + 5, at most 80 target pieces) before ending, maybe cut short: line .*/\1/p' "$tmp/f3.log")
if [ -n "$limited" ] && [ "$limited" -ge 20 ] && [ "$(same "$tmp/f3.en")" -lt "$auto_same" ] &&
  grep -q "length limit: 3 × source pieces + 5 (--max-len-factor; auto would be 15, from the training corpus's" "$tmp/f3.log"; then ok
else bad "translate --max-len-factor 3: '$limited' stopped at the limit, $(same "$tmp/f3.en") right: $(grep -i 'limit' "$tmp/f3.log")"; fi

# evaluate says the same.
"$nmt" evaluate --checkpoint "$tmp/run" --src "$tmp/c.zh" --ref "$tmp/c.en" >"$tmp/eval.out" 2>"$tmp/eval.log" ||
  bad "evaluate: $(tail -2 "$tmp/eval.log")"
if grep -q "evaluate: $tmp/c.zh: 0 of 50 translations stopped at the length limit" "$tmp/eval.log"; then ok
else bad "evaluate: $(grep -i limit "$tmp/eval.log")"; fi

# A checkpoint saved before the ratio was recorded (its config says
# max_len_factor 3, as every config did): it translates as before, and says why.
cp -r "$tmp/run/last" "$tmp/old"
/usr/bin/python3 - "$tmp/old" <<'PY'
import hashlib, os, re, sys
d = sys.argv[1]
for name, pattern, repl in (("state.yaml", r"target_source_ratio: .*\n", ""),
                            ("config.yaml", r"max_len_factor: auto", "max_len_factor: 3")):
    p = os.path.join(d, name)
    text = open(p).read()
    assert re.search(pattern, text), name
    open(p, "w").write(re.sub(pattern, repl, text))
lines = open(os.path.join(d, "manifest.txt")).read().splitlines()
out = [lines[0]]
for line in lines[1:]:
    name = line.split()[2]
    data = open(os.path.join(d, name), "rb").read()
    out.append(f"{hashlib.sha256(data).hexdigest()} {len(data)} {name}")
open(os.path.join(d, "manifest.txt"), "w").write("\n".join(out) + "\n")
PY
"$nmt" translate --checkpoint "$tmp/old" --input "$tmp/c.zh" --output "$tmp/old.en" >"$tmp/old.log" 2>&1
rc=$?
if [ $rc = 0 ] && cmp -s "$tmp/old.en" "$tmp/f3.en" &&
  grep -q "length limit: 3 × source pieces + 5 (decode.max_len_factor; the checkpoint records no target/source length ratio of its training corpus (saved by an earlier nmt))" "$tmp/old.log" &&
  grep -q "translate: $limited of 50 translations stopped at the length limit" "$tmp/old.log"; then ok
else bad "an old checkpoint: exit $rc: $(grep -i 'limit\|error' "$tmp/old.log")"; fi
# ... and one whose config asks for auto (no ratio to derive it from): the earlier default.
"$nmt" translate --checkpoint "$tmp/old" --input "$tmp/c.zh" --output "$tmp/old_auto.en" --max-len-factor auto >"$tmp/old_auto.log" 2>&1
if cmp -s "$tmp/old_auto.en" "$tmp/f3.en" &&
  grep -q "length limit: 3 × source pieces + 5 (the checkpoint records no target/source length ratio of its training corpus (saved by an earlier nmt), so the earlier default 3; set --max-len-factor if translations stop at it)" "$tmp/old_auto.log"; then ok
else bad "an old checkpoint, auto: $(grep -i 'limit\|error' "$tmp/old_auto.log")"; fi

# A corpus prepared before the ratio was recorded: counted from its index
# on the next use (no preparing again), and recorded.
manifest=$(ls "$tmp"/prep/*/manifest.json)
/usr/bin/python3 -c "import json,sys; m=json.load(open(sys.argv[1])); del m['target_source_ratio']; json.dump(m, open(sys.argv[1], 'w'), indent=1)" "$manifest"
"$nmt" prepare --config "$tmp/c.yaml" >"$tmp/prep.out" 2>"$tmp/prep.log"
if grep -q "target/source length ratio 10 counted from its index and recorded" "$tmp/prep.log" &&
  grep -q "up to date" "$tmp/prep.out" && grep -q '"target_source_ratio": 10' "$manifest"; then ok
else bad "an old prepared corpus: $(cat "$tmp/prep.log" "$tmp/prep.out" | tail -4)"; fi

summary length_limit
