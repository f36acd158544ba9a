#!/usr/bin/env bash
# nmt check-po's placeholder check on every installed zh_CN catalog, against
# msgfmt -c: how many entries each reports, and the hints.
#
# Usage: bench/check_po_catalogs.sh [--baseline BUILD] [--out FILE]
#   --baseline BUILD: also count what another build's nmt reports (a column)
#   default output: docs/bench/check_po_catalogs.md
#
# Each /usr/share/locale/zh_CN/LC_MESSAGES/*.mo is read back with msgunfmt
# (a .mo keeps no flags, so msgfmt -c alone would check nothing); for the
# msgfmt column, `#, c-format` is added to every entry whose msgid holds a
# printf directive, as xgettext flags them, and msgfmt -c's format errors
# are counted. Needs gettext (msgunfmt, msgfmt).
set -euo pipefail
cd "$(dirname "$0")/.."
baseline="" out=docs/bench/check_po_catalogs.md
while (($#)); do
  case $1 in
    --baseline) baseline=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check_po_catalogs: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
nmt=${NMT_BUILD_DIR:-build}/nmt
[ -x "$nmt" ] || { echo "check_po_catalogs: no $nmt (run scripts/setup.sh)" >&2; exit 2; }
[ -z "$baseline" ] || [ -x "$baseline/nmt" ] || { echo "check_po_catalogs: no $baseline/nmt" >&2; exit 2; }
command -v msgunfmt >/dev/null || { echo "check_po_catalogs: needs gettext (msgunfmt, msgfmt)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

count() { grep -m1 -o "$1: [0-9]*" "$2" | grep -o '[0-9]*$' || echo 0; }
for mo in /usr/share/locale/zh_CN/LC_MESSAGES/*.mo; do
  name=$(basename "$mo" .mo)
  msgunfmt "$mo" -o "$work/$name.po" 2>/dev/null || continue
  python3 - "$work/$name.po" "$work/$name.flagged.po" <<'PY'
import re, sys
directive = re.compile(r"%(?:\d+\$)?[-+#0'I]*(?:\*(?:\d+\$)?|\d+)?(?:\.(?:\*(?:\d+\$)?|\d+))?"
                       r"(?:hh|ll|[hlLqjzZt])?[diouxXeEfFgGaAcspnm]|%<PRI")
blocks = open(sys.argv[1], encoding="utf-8").read().split("\n\n")
for i, b in enumerate(blocks):
    m = re.search(r'^msgid "(.*?)"\n(?=msgid_plural|msgstr)', b, re.S | re.M)
    msgid = "".join(re.findall(r'"(.*)"', m.group(0))) if m else ""
    if msgid and directive.search(msgid.replace("%%", "")) and not b.startswith("#"):
        blocks[i] = "#, c-format\n" + b
open(sys.argv[2], "w", encoding="utf-8").write("\n\n".join(blocks))
PY
  msgfmt -c -o /dev/null "$work/$name.flagged.po" >"$work/$name.msgfmt" 2>&1 || true
  "$nmt" check-po "$work/$name.po" >"$work/$name.now" 2>/dev/null || true
  before=""
  if [ -n "$baseline" ]; then
    "$baseline/nmt" check-po "$work/$name.po" >"$work/$name.before" 2>/dev/null || true
    before=$(count placeholders "$work/$name.before")
  fi
  echo "$name ${before:--} $(count placeholders "$work/$name.now") $(count hints "$work/$name.now") $(grep -c "^$work/$name.flagged.po:[0-9]*:.*format" "$work/$name.msgfmt" || true)"
done >"$work/rows"
python3 - "$work/rows" "$out" "$baseline" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
base = sys.argv[3]
out = ["# nmt check-po on the installed zh_CN catalogs, placeholders only", "",
       f"`bench/check_po_catalogs.sh{' --baseline ' + base if base else ''}`: every catalog of "
       "`/usr/share/locale/zh_CN/LC_MESSAGES` ({n}), read back with `msgunfmt`. `msgfmt -c`: format errors "
       "once every entry whose msgid holds a printf directive is flagged `c-format`, as `xgettext` flags them.".format(n=len(rows)),
       "", "| catalog |" + (" reported by the baseline |" if base else "") + " reported | hints | `msgfmt -c` format errors |",
       "|---|" + ("--:|" if base else "") + "--:|--:|--:|"]
tot = [0, 0, 0, 0]
for name, b, now, hints, mf in rows:
    vals = [0 if b == "-" else int(b), int(now), int(hints), int(mf)]
    tot = [x + y for x, y in zip(tot, vals)]
    if any(vals):
        out.append(f"| {name} |" + (f" {vals[0]} |" if base else "") + f" {vals[1]} | {vals[2]} | {vals[3]} |")
out.append(f"| **all {len(rows)}** |" + (f" **{tot[0]}** |" if base else "") + f" **{tot[1]}** | {tot[2]} | {tot[3]} |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
