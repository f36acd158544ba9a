#!/usr/bin/python3
"""A Chinese -> English parallel corpus from one gettext catalog, for
fine-tuning a model trained on data/real (`train.init_from`,
docs/fine_tuning.md).

The catalog's entries go through exactly what made data/real: .mo parsing,
mnemonics and whitespace normalised, the same filters (untranslated,
multi-line, too long, ...), one English target per Chinese source, and the
split that keeps pairs differing only in case or punctuation together.
Source side (.zh) = msgstr, target side (.en) = msgid.

Usage:
  /usr/bin/python3 scripts/catalog_corpus.py CATALOG.po|CATALOG.mo --out DIR
                   [--test N] [--valid N]

writes DIR/{train,valid,test}.{zh,en} (test and valid of N pairs each,
default 300 and 200; the rest is train) and prints the counts. A .po file
is compiled with `msgfmt` first (GNU gettext); only the standard library is
used otherwise. Exit 2 on a catalog it cannot read.
"""

import argparse
import os
import subprocess
import sys
import unicodedata
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_real_corpus as real  # noqa: E402  (the filters data/real was made with)


def fail(message):
    print(f"catalog_corpus: {message}", file=sys.stderr)
    sys.exit(2)


def read_catalog(path):
    """The catalog's .mo bytes (a .po compiled by msgfmt)."""
    if path.endswith(".po"):
        proc = subprocess.run(["msgfmt", "--output-file=-", path], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        if proc.returncode != 0:
            why = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            fail(f"{path}: msgfmt failed: {why[0] if why else proc.returncode}")
        return proc.stdout
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")


def catalog_pairs(path):
    """(zh, en) pairs of one catalog after data/real's filters, and the
    filter counts."""
    try:
        entries = real.parse_mo(read_catalog(path), path)
        charset = real.catalog_charset(entries)
        raw = []
        for _ctxt, msgid, plural, msgstr in entries:
            if msgid == b"":
                continue  # the header entry
            zh = unicodedata.normalize("NFC", msgstr.decode(charset))
            en = unicodedata.normalize("NFC", msgid.decode(charset))
            if plural is not None:
                en_plural = unicodedata.normalize("NFC", plural.decode(charset))
                if real.use_plural(zh, en, en_plural):
                    en = en_plural
            raw.append((zh, en))
    except (OSError, ValueError, LookupError) as e:
        fail(str(e) if str(e).startswith(path) else f"{path}: {e}")  # parse_mo names the file itself
    gtk = real.uses_gtk_mnemonics(raw)
    drop = Counter()
    targets = defaultdict(Counter)
    for zh_raw, en_raw in raw:
        why, zh, en = real.check(zh_raw, en_raw, gtk)
        if why:
            drop[why] += 1
        else:
            targets[zh][en] += 1
    # One English target per Chinese source: the most frequent, then the smallest.
    pairs = [(zh, min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0]) for zh, c in sorted(targets.items())]
    return pairs, len(raw), drop


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("catalog", help="a gettext catalog: .po (compiled with msgfmt) or .mo")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--test", type=int, default=300, help="test pairs (default %(default)s)")
    ap.add_argument("--valid", type=int, default=200, help="validation pairs (default %(default)s)")
    args = ap.parse_args()
    if args.test < 1 or args.valid < 1:
        ap.error("--test and --valid must be at least 1")
    pairs, entries, drop = catalog_pairs(args.catalog)
    if len(pairs) < args.test + args.valid + 1:
        fail(f"{args.catalog}: {len(pairs)} pairs after the filters, too few for "
                 f"--test {args.test} and --valid {args.valid} and a training split")
    real.N_TEST, real.N_VALID = args.test, args.valid
    splits = real.split(pairs)
    os.makedirs(args.out, exist_ok=True)
    for name in ("train", "valid", "test"):
        for side, i in (("zh", 0), ("en", 1)):
            with open(os.path.join(args.out, f"{name}.{side}"), "w", encoding="utf-8", newline="\n") as f:
                f.writelines(p[i] + "\n" for p in splits[name])
    dropped = ", ".join(f"{n} {k}" for k, n in sorted(drop.items())) or "none"
    print(f"{args.catalog}: {entries} entries, {len(pairs)} pairs kept (dropped: {dropped}); "
          f"{args.out}: train {len(splits['train'])}, valid {len(splits['valid'])}, test {len(splits['test'])}")


if __name__ == "__main__":
    main()
