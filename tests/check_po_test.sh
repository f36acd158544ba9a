#!/usr/bin/env bash
# nmt check-po end to end: placeholders without a model (exit 3 when wrong,
# 0 when right), the ranked back-translations with a tiny model (text and
# JSON), and bad catalogs (exit 2, "FILE:LINE: what").
# Usage: check_po_test.sh NMT_BINARY SOURCE_DIR
set -u
nmt=$1
src=$2
. "$(dirname "$0")/lib.sh"
make_temp_dir

cat >"$tmp/good.po" <<'PO'
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=1; plural=0;\n"

#, c-format
msgid "cannot open %s: %s"
msgstr "无法打开 %s：%s"

msgid "he likes to dance"
msgstr "他喜欢跳舞"

#, c-format
msgid "%d file"
msgid_plural "%d files"
msgstr[0] "%d 个文件"

#, fuzzy, c-format
msgid "removed %s"
msgstr "已删除"

#~ msgid "old"
#~ msgstr "旧"
PO
# The same with three placeholder faults: one dropped, one reordered, one extra.
sed -e 's/msgstr "无法打开 %s：%s"/msgstr "无法打开 %s"/' "$tmp/good.po" >"$tmp/faulty.po"
cat >>"$tmp/faulty.po" <<'PO'

#, c-format
msgid "%s has %d items"
msgstr "%d 项在 %s 中"

msgid "<b>Name</b>"
msgstr "<b>名称</b> %d"
PO

# ---- Placeholders alone, no model.
out=$("$nmt" check-po "$tmp/good.po" 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "3 translated and checked (skipped: 1 fuzzy, 0 untranslated, 1 obsolete)" <<<"$out" &&
   grep -q "placeholders: 0 translation(s) differ" <<<"$out"; then ok; else bad "good.po: exit $rc: $out"; fi

out=$("$nmt" check-po "$tmp/faulty.po" 2>&1)
rc=$?
if [ $rc -eq 3 ] && grep -q "placeholders: 3 translation(s) differ" <<<"$out" &&
   grep -q "faulty.po:7: missing %s" <<<"$out" &&
   grep -q "faulty.po:[0-9]*: reordered %s %d -> %d %s" <<<"$out" &&
   grep -q "faulty.po:[0-9]*: extra %d" <<<"$out"; then ok; else bad "faulty.po: exit $rc: $out"; fi

# ---- With a (tiny, barely trained) model: every translation back-translated and ranked.
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=5 --set train.checkpoint_dir="$tmp/run" \
  --set train.valid_bleu_sentences=16 >"$tmp/train.log" 2>&1 ||
  { bad "training the tiny model failed: $(tail -3 "$tmp/train.log")"; summary check_po; exit; }
"$nmt" check-po "$tmp/faulty.po" --checkpoint "$tmp/run" --json --top 0 >"$tmp/out.json" 2>"$tmp/err.log"
rc=$?
if [ $rc -eq 3 ] && python3 - "$tmp/out.json" <<'PY'; then ok; else bad "check-po --json: exit $rc: $(cat "$tmp/err.log")"; fi
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["translated"] == 5 and j["fuzzy"] == 1 and j["obsolete"] == 1, j
assert len(j["placeholders"]) == 3, j["placeholders"]
kinds = sorted(p["kind"] for e in j["placeholders"] for p in e["problems"])
assert kinds == ["extra", "missing", "reordered"], kinds
r = j["ranked"]
assert len(r) == 5 and j["rank"] == "combined", r
assert all(isinstance(e["back_translation"], str) for e in r), r  # a 5-step model often says nothing
assert all(math.isfinite(e["score"]) and e["score"] < 0 and 0 <= e["chrf"] <= 100 for e in r), r
keys = [e["combined"] for e in r]
assert keys == sorted(keys), keys
assert all(math.isfinite(e[k]) for e in r for k in ("combined", "support", "length", "foreign", "gap")), r
assert all(e["combined"] <= e["gap"] + 1e-9 and 0 <= e["foreign"] <= 1 for e in r), r
assert any(e.get("form") == 0 and e["msgid"] == "%d files" for e in r), r
# A rival, where there is one, is another entry of this catalog.
lines = {e["line"] for e in r}
assert all(e["rival"] is None or (math.isfinite(e["rival"]) and e["rival_line"] in lines - {e["line"]}) for e in r), r
PY
out=$("$nmt" check-po "$tmp/good.po" --checkpoint "$tmp/run" --top 2 --rank chrf 2>/dev/null)
rc=$?
if [ $rc -eq 0 ] && grep -q "furthest from their msgid, by chrf (model .*): 2 of 3" <<<"$out" &&
   [ "$(grep -c '^  back   "' <<<"$out")" -eq 2 ]; then ok; else bad "good.po --top 2: exit $rc: $out"; fi

# A plural entry whose two forms hold the same text (Chinese has one plural
# form; catalogs often give two): one row, msgstr[0,1], in the placeholder
# list and in the ranking. And a checkpoint too weak to rank with (5 steps:
# validation BLEU near 0) is named as such, in the report and its JSON.
cat >"$tmp/plural.po" <<'PO'
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#, c-format
msgid "%d file removed"
msgid_plural "%d files removed"
msgstr[0] "已删除 %d 个文件"
msgstr[1] "已删除 %d 个文件"

#, c-format
msgid "%d file deleted"
msgid_plural "%d files deleted"
msgstr[0] "已删除 %d 个文件 %s"
msgstr[1] "已删除 %d 个文件 %s"

#, c-format
msgid "%s: %d item"
msgid_plural "%s: %d items"
msgstr[0] "%d 项"
msgstr[1] "%d 项"

msgid "he likes to dance"
msgstr "他喜欢跳舞"
PO
out=$("$nmt" check-po "$tmp/plural.po" --checkpoint "$tmp/run" --top 0 2>"$tmp/plural.log")
rc=$?
# Same text, same findings: one row. Same text, other findings (form 0 is
# for n = 1 alone and may leave the number out): a row each in the
# placeholder list, one in the ranking.
if [ $rc -eq 3 ] && grep -q "^$tmp/plural.po:13 msgstr\[0,1\]: extra %s$" <<<"$out" &&
   grep -q "^$tmp/plural.po:19 msgstr\[0\]: changed" <<<"$out" && grep -q "^$tmp/plural.po:19 msgstr\[1\]: missing %d" <<<"$out" &&
   grep -q "placeholders: 3 translation(s) differ" <<<"$out" &&
   [ "$(grep -cE "plural.po:(7|13|19) msgstr\[0,1\]: combined" <<<"$out")" -eq 3 ] &&
   [ "$(grep -cE "plural.po:[0-9]+ msgstr\[[01]\]: combined" <<<"$out")" -eq 0 ] &&
   grep -q "furthest from their msgid, by combined (model .*): 4 of 4" <<<"$out" &&
   grep -qE "^warning: the checkpoint's validation BLEU is [0-9.]+ \(step 5\), under 20: its back-translations are too often wrong for this ranking to mean much" <<<"$out" &&
   grep -q "check-po: the checkpoint's validation BLEU is" "$tmp/plural.log"; then ok
else bad "plural.po: exit $rc: $out"; fi
"$nmt" check-po "$tmp/plural.po" --checkpoint "$tmp/run" --json >"$tmp/plural.json" 2>/dev/null
if python3 - "$tmp/plural.json" <<'PY'; then ok; else bad "plural.po --json: $(head -c 600 "$tmp/plural.json")"; fi
import json, sys
j = json.load(open(sys.argv[1]))
assert "validation BLEU" in j["warning"], j.get("warning")
assert sorted(e["forms"] for e in j["ranked"] if "forms" in e) == [[0, 1]] * 3, j["ranked"]
assert [e["forms"] for e in j["placeholders"]] == [[0, 1], [0], [1]], j["placeholders"]
PY

# A catalog of real software messages, read by a model of the toy corpus:
# whatever the checkpoint's own validation says, its fit is judged on the
# catalog itself (unknown tokens, back-translations far from their msgids)
# and named, in the log, the report and the JSON.
{
  printf 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
  paste -d'\t' <(head -30 "$src/data/real/test.en") <(head -30 "$src/data/real/test.zh") | grep -v '"\|\\' |
    while IFS=$'\t' read -r en zh; do printf 'msgid "%s"\nmsgstr "%s"\n\n' "$en" "$zh"; done
} >"$tmp/software.po"
out=$("$nmt" check-po "$tmp/software.po" --checkpoint "$tmp/run" --top 3 2>"$tmp/software.log")
rc=$?
if [ $rc -eq 0 ] && grep -qE "^warning: .*this model does not fit the catalog: its vocabulary lacks [0-9]+% of the input's [0-9]+ tokens" <<<"$out" &&
   grep -q "check-po: this model does not fit the catalog" "$tmp/software.log"; then ok
else bad "software.po with a toy model: exit $rc: $(grep -i 'warn\|fit' <<<"$out$(cat "$tmp/software.log")")"; fi
"$nmt" check-po "$tmp/software.po" --checkpoint "$tmp/run" --json 2>/dev/null | grep -q '"warning": ".*does not fit the catalog' && ok ||
  bad "software.po --json: no warning of the misfit"

# An entry longer than the model's positions (256) is scored on its prefix,
# back-translated from its first 256 tokens (the rule of every entry point),
# and the log names its line.
python3 -c 'print("msgid \"" + " ".join(["he likes to dance"] * 120) + "\"\nmsgstr \"" + "他喜欢跳舞" * 120 + "\"")' >"$tmp/long.po"
out=$("$nmt" check-po "$tmp/long.po" --checkpoint "$tmp/run" --json 2>"$tmp/err.log")
rc=$?
if [ $rc -eq 0 ] && python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert len(j["ranked"]) == 1' "$out" &&
   grep -qE "check-po: .*long.po:1: msgstr of [0-9]+ tokens, cut to the first 256 this model reads" "$tmp/err.log"; then ok
else bad "long.po: exit $rc: $(tail -2 "$tmp/err.log")"; fi

# ---- Bad catalogs and flags: exit 2, one line naming the file and line.
expect2() {  # PATTERN -- command...
  local pattern=$1
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -c '^nmt: error: ' <<<"$err")" -eq 1 ] && grep -qE -- "$pattern" <<<"$err"; then ok
  else bad "$* -> exit $rc: $err (wanted exit 2 and /$pattern/)"; fi
}
printf 'msgid "a"\nmsgstr "b\n' >"$tmp/bad.po"
expect2 "bad.po:2: a string without its closing quote" -- "$nmt" check-po "$tmp/bad.po"
printf 'msgid "a"\nmsgstr "b"\n\nmsgid "a"\nmsgstr "c"\n' >"$tmp/dup.po"
expect2 "dup.po:4: duplicate message definition \\(first at line 1\\)" -- "$nmt" check-po "$tmp/dup.po"
expect2 "none.po: cannot open catalog" -- "$nmt" check-po "$tmp/none.po"
expect2 "rank" -- "$nmt" check-po "$tmp/good.po" --rank best
expect2 "no such checkpoint folder" -- "$nmt" check-po "$tmp/good.po" --checkpoint "$tmp/nothing"

summary check_po
