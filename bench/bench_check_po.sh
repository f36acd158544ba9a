#!/usr/bin/env bash
# nmt check-po on real zh_CN catalogs with injected faults: how many of each
# fault kind it finds, at how many false alarms, against msgfmt -c alone.
#
# Usage: bench/bench_check_po.sh --checkpoint DIR [--per-kind N] [--seed S] [--threads N] [--out DIR] [--keep DIR]
#   defaults: 10 faults of each kind per catalog, seed 1, 2 threads, docs/bench
#   --keep DIR: leave each catalog's faulty .po, truth and check-po JSON there
#
# The catalogs are Debian's installed zh_CN .mo files that data/real was not
# made from (turned back into .po by msgunfmt). Ten dev catalogs (xz,
# initdb-15, pg_upgrade-15, pg_ctl-15, avahi, gstreamer-1.0, libexif-12,
# at-spi2-core, gdk-pixbuf, appstream) set each ranking's threshold (the
# score below which 5% of their clean entries fall) and are what
# `check_po_faults.py fit` fits the combined ranking on; psql-15, pg_dump-15,
# systemd, findutils, gnutls30 and PackageKit are scored with it. Faults (bench/check_po_faults.py): a placeholder dropped or
# altered, two entries' msgstr swapped, a msgstr truncated to its first half.
# An entry counts as found when check-po's placeholder check names it or its
# rank score is below the threshold; false alarms are the clean entries
# found. Writes OUT/check_po.md.
set -euo pipefail
cd "$(dirname "$0")/.."
checkpoint="" per_kind=10 seed=1 threads=2 out=docs/bench keep=""
while (($#)); do
  case $1 in
    --checkpoint) checkpoint=$2; shift 2 ;;
    --per-kind) per_kind=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_check_po: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$checkpoint" ] || { echo "bench_check_po: --checkpoint DIR is required" >&2; exit 2; }
nmt=${NMT_BUILD_DIR:-build}/nmt
[ -x "$nmt" ] || { echo "bench_check_po: no $nmt (run scripts/setup.sh)" >&2; exit 2; }
command -v msgunfmt >/dev/null || { echo "bench_check_po: needs gettext (msgunfmt, msgfmt)" >&2; exit 2; }
locale=/usr/share/locale/zh_CN/LC_MESSAGES
dev=(xz initdb-15 pg_upgrade-15 pg_ctl-15 avahi gstreamer-1.0 libexif-12 at-spi2-core gdk-pixbuf appstream)
test=(psql-15 pg_dump-15 systemd findutils gnutls30 PackageKit)
if [ -n "$keep" ]; then
  work=$keep
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$out"
for name in "${dev[@]}" "${test[@]}"; do
  [ -f "$locale/$name.mo" ] || { echo "bench_check_po: $locale/$name.mo is not installed" >&2; exit 2; }
  d=$work/$name
  mkdir -p "$d"
  msgunfmt "$locale/$name.mo" -o "$d/clean.po"
  python3 bench/check_po_faults.py inject "$d/clean.po" "$d/$name.po" "$d/truth.json" --seed "$seed" --per-kind "$per_kind"
  echo "bench_check_po: $name" >&2
  rc=0
  "$nmt" check-po "$d/$name.po" --checkpoint "$checkpoint" --threads "$threads" --json --top 0 >"$d/checkpo.json" \
    2>"$d/checkpo.log" || rc=$?
  # Exit 3 means placeholder findings (kExitFaultsFound); the JSON holds them.
  { ((rc == 0 || rc == 3)) && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$d/checkpo.json" 2>/dev/null; } ||
    { echo "bench_check_po: nmt check-po failed on $name (exit $rc):" >&2; tail -3 "$d/checkpo.log" >&2; exit 1; }
  msgfmt -c -o /dev/null "$d/$name.po" 2>"$d/msgfmt.txt" || true
done
{
  echo "# nmt check-po on catalogs with injected faults"
  echo
  echo "\`bench/bench_check_po.sh --checkpoint $checkpoint --per-kind $per_kind --seed $seed\`; model step" \
       "$(sed -n 's/.*(step \([0-9]*\)).*/\1/p' "$work/${test[0]}/checkpo.log" | head -1)."
  echo
  python3 bench/check_po_faults.py report --dev "${dev[@]/#/$work/}" --test "${test[@]/#/$work/}"
  echo "### The combined ranking's weights, fitted on these dev catalogs"
  echo
  echo "(\`bench/check_po_faults.py fit\`; src/eval/po_check.cpp keeps them as constants)"
  echo
  echo '```'
  python3 bench/check_po_faults.py fit --dev "${dev[@]/#/$work/}"
  echo '```'
} | tee "$out/check_po.md"
