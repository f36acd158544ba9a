#!/usr/bin/env python3
"""Faults injected into real zh_CN catalogs, and what `nmt check-po` finds of them.

Used by bench/bench_check_po.sh. Subcommands:

  inject CLEAN.po FAULTY.po TRUTH.json --seed S --per-kind N
      Writes FAULTY.po: CLEAN.po (msgunfmt's output) with N entries of each
      fault kind changed, and TRUTH.json: the kind ("clean" or a fault) of
      every translated singular entry by its msgid line in FAULTY.po.
      Entries whose msgid has a printf conversion get "#, c-format" (the .mo
      lost the flag; xgettext sets it), so that msgfmt -c checks them.
      Kinds: placeholder-drop (one placeholder of the msgstr removed; not
      from a msgstr of placeholders alone, which would become untranslated),
      placeholder-alter (one changed: %s <-> %d, {0} -> {1}, ...), swap (two
      entries exchange their msgstr; both count), truncate (the msgstr cut to
      its first half). Entries are drawn from the translated singular ones;
      each is changed at most once.

  fit --dev DIR...
      Fits check-po's combined ranking on the dev catalogs: a logistic
      regression of fault (swap or truncate) against clean on the gap, the
      FormFit length below and above the clean entries' median and the share
      of foreign words; then the weight of the rival's lead (its positive
      part) that finds most dev faults at 5% dev false alarms, the others
      fixed; prints the weights in the gap's units, which
      src/eval/po_check.cpp keeps as constants.

  report --dev DIR... --test DIR... [--out FILE]
      DIR holds one catalog's TRUTH.json, checkpo.json (nmt check-po --json
      --top 0) and msgfmt.txt (msgfmt -c's errors). For each ranking of
      check-po (combined, support, gap, score, chrf) the threshold is the one that flags 5% of
      the dev catalogs' clean entries; the test catalogs are scored with it.
      Prints, per fault kind, the share found by the placeholder check, by the
      ranking and by either, the false alarms among clean entries, and what
      msgfmt -c alone finds.

Only msgunfmt's regular output is read here (blocks of keyword lines and
continued strings); the product's reader is src/data/po_catalog.cpp.
"""
import argparse
import ast
import json
import math
import os
import random
import re
import sys

PLACEHOLDER = re.compile(r"%(?:\d+\$)?[-+#0']*\d*(?:\.\d+)?(?:hh|ll|[hlLqjzt])?[diouxXeEfFgGaAcsp]|\{\w+\}")
KINDS = ["placeholder-drop", "placeholder-alter", "swap", "truncate"]


def decode(quoted_parts):
    return "".join(ast.literal_eval(p) for p in quoted_parts)


def encode(text):
    out = []
    for c in text:
        out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\"}.get(c, c))
    return '"' + "".join(out) + '"'


def read_blocks(path):
    """[{keyword: [quoted strings]} in order], one per entry."""
    blocks, cur, key = [], None, None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip():
            if cur:
                blocks.append(cur)
            cur, key = None, None
            continue
        if line.startswith("#"):
            cur = cur or []
            cur.append(("#", line))
            continue
        cur = cur or []
        if line.startswith('"'):
            cur[-1][1].append(line)
        else:
            key, rest = line.split(" ", 1)
            cur.append((key, [rest]))
    if cur:
        blocks.append(cur)
    return blocks


def field(block, key):
    for k, v in block:
        if k == key:
            return decode(v)
    return None


def set_field(block, key, text):
    for i, (k, _) in enumerate(block):
        if k == key:
            block[i] = (k, [encode(text)])


def write_blocks(blocks, path):
    """Writes the blocks; returns the msgid line of each."""
    lines, msgid_lines = [], []
    for b in blocks:
        for k, v in b:
            if k == "#":
                lines.append(v)
                continue
            if k == "msgid":
                msgid_lines.append(len(lines) + 1)
            lines.append(f"{k} {v[0]}")
            lines.extend(v[1:])
        lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return msgid_lines


def alter(p):
    swaps = {"s": "d", "d": "s", "u": "s", "ld": "s", "lu": "d", "zu": "s", "x": "d", "c": "s", "f": "d", "p": "s"}
    m = re.match(r"(%(?:\d+\$)?[-+#0']*\d*(?:\.\d+)?)((?:hh|ll|[hlLqjzt])?[diouxXeEfFgGaAcsp])$", p)
    if m:
        return m.group(1) + swaps.get(m.group(2), "s")
    if p.startswith("{"):
        inner = p[1:-1]
        return "{" + (str(int(inner) + 1) if inner.isdigit() else inner + "_x") + "}"
    return None


def inject(args):
    rnd = random.Random(args.seed)
    blocks = read_blocks(args.clean)
    # A .mo keeps no flags, so msgunfmt's catalog has none, and msgfmt -c checks
    # formats only of entries flagged c-format. xgettext flags a message with
    # printf conversions so: give msgfmt the flags the source catalog had.
    for b in blocks:
        msgid = field(b, "msgid")
        if msgid and re.search(r"%(?:\d+\$)?[-+#0' ]*\d*(?:\.\d+)?(?:hh|ll|[hlLqjzt])?[diouxXeEfFgGaAcsp]", msgid) \
                and not any(k == "#" for k, _ in b):
            b.insert(0, ("#", "#, c-format"))
    usable = [i for i, b in enumerate(blocks)
              if field(b, "msgid") and field(b, "msgstr") and field(b, "msgid_plural") is None
              and not any(k == "#" and "fuzzy" in v for k, v in b)]
    rnd.shuffle(usable)
    taken, truth = set(), {}

    def pick(cond):
        for i in usable:
            if i not in taken and cond(i):
                taken.add(i)
                return i
        return None

    for _ in range(args.per_kind):
        # Not a msgstr of placeholders alone: "%s" less its placeholder is
        # empty, which gettext reads as "untranslated" (it prints the msgid),
        # not as a fault.
        i = pick(lambda i: PLACEHOLDER.search(field(blocks[i], "msgstr"))
                 and PLACEHOLDER.sub("", field(blocks[i], "msgstr")).strip())
        if i is not None:
            s = field(blocks[i], "msgstr")
            ms = list(PLACEHOLDER.finditer(s))
            m = ms[rnd.randrange(len(ms))]
            set_field(blocks[i], "msgstr", s[:m.start()] + s[m.end():])
            truth[i] = "placeholder-drop"
        i = pick(lambda i: any(alter(m.group()) for m in PLACEHOLDER.finditer(field(blocks[i], "msgstr"))))
        if i is not None:
            s = field(blocks[i], "msgstr")
            ms = [m for m in PLACEHOLDER.finditer(s) if alter(m.group())]
            m = ms[rnd.randrange(len(ms))]
            set_field(blocks[i], "msgstr", s[:m.start()] + alter(m.group()) + s[m.end():])
            truth[i] = "placeholder-alter"
        a = pick(lambda i: True)
        b = pick(lambda i: a is not None and field(blocks[i], "msgstr") != field(blocks[a], "msgstr")
                 and field(blocks[i], "msgid") != field(blocks[a], "msgid"))
        if a is not None and b is not None:
            sa, sb = field(blocks[a], "msgstr"), field(blocks[b], "msgstr")
            set_field(blocks[a], "msgstr", sb)
            set_field(blocks[b], "msgstr", sa)
            truth[a] = truth[b] = "swap"
        i = pick(lambda i: len(field(blocks[i], "msgstr").strip()) >= 4)
        if i is not None:
            s = field(blocks[i], "msgstr")
            set_field(blocks[i], "msgstr", s[:len(s) // 2])
            truth[i] = "truncate"
    msgid_lines = write_blocks(blocks, args.faulty)
    # Every translated singular entry, faulty or clean, by its msgid line.
    entries = {str(msgid_lines[i]): truth.get(i, "clean") for i in usable}
    json.dump({"entries": entries, "msgid_lines": msgid_lines}, open(args.truth, "w"), indent=0)


def msgfmt_lines(path):
    """Lines msgfmt -c names, as the msgid lines of their entries (it names the msgstr's or the msgid's)."""
    out = set()
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"[^:]+:(\d+):", line)
        if m:
            out.add(int(m.group(1)))
    return out


def load(d):
    t = json.load(open(os.path.join(d, "truth.json")))
    truth = {int(k): v for k, v in t["entries"].items()}
    check = json.load(open(os.path.join(d, "checkpo.json")))
    # What the placeholder check shows: its faults, and its hints (an option
    # name of the msgid that the msgstr lacks), which check-po lists apart.
    ph = {e["line"] for e in check["placeholders"]} | {e["line"] for e in check.get("hints", [])}
    ranked = {e["line"]: e for e in check["ranked"]}
    named = msgfmt_lines(os.path.join(d, "msgfmt.txt"))
    # msgfmt names the msgstr's line: the entry is the one whose msgid line is the last before it.
    starts = sorted(t["msgid_lines"])
    by_msgfmt = set()
    for n in named:
        before = [s for s in starts if s <= n]
        if before:
            by_msgfmt.add(before[-1])
    return truth, ph, ranked, by_msgfmt


def report(args):
    dev = [load(d) for d in args.dev]
    test = [load(d) for d in args.test]
    out = []
    p = out.append
    counts = {}
    for truth, *_ in test:
        for kind in truth.values():
            counts[kind] = counts.get(kind, 0) + 1
    p(f"Test catalogs: {', '.join(os.path.basename(d.rstrip('/')) for d in args.test)}; "
      f"dev (threshold): {', '.join(os.path.basename(d.rstrip('/')) for d in args.dev)}.")
    p("Entries checked: " + ", ".join(f"{k} {counts.get(k, 0)}" for k in ["clean"] + KINDS) + ".\n")
    ranks = [k for k in ["combined", "support", "gap", "score", "chrf"] if any(k in e for _, _, r, _ in dev for e in r.values())]
    for rank in ranks:
        clean_dev = sorted(r[line][rank] for truth, _, r, _ in dev for line, k in truth.items() if k == "clean" and line in r)
        threshold = clean_dev[int(0.05 * len(clean_dev))] if clean_dev else float("-inf")
        p(f"### ranked by {rank}: flagged when below {threshold:.3f} (flags 5% of the dev catalogs' clean entries)\n")
        p("| fault | entries | placeholder check | ranking | either | msgfmt -c |")
        p("|---|---|---|---|---|---|")
        together = [0, 0]  # swapped or truncated: entries, found by either
        for kind in KINDS + ["clean"]:
            n = ph_hits = rank_hits = either = mf = 0
            for truth, ph, r, by_msgfmt in test:
                for line, k in truth.items():
                    if k != kind:
                        continue
                    n += 1
                    a = line in ph
                    b = line in r and r[line][rank] < threshold
                    ph_hits += a
                    rank_hits += b
                    either += a or b
                    mf += line in by_msgfmt
            pct = lambda x: f"{x} ({100 * x / n:.1f}%)" if n else "0"
            label = "clean (false alarms)" if kind == "clean" else kind
            p(f"| {label} | {n} | {pct(ph_hits)} | {pct(rank_hits)} | {pct(either)} | {pct(mf)} |")
            if kind in ("swap", "truncate"):
                together[0] += n
                together[1] += either
            if kind == "clean":
                false_alarms = either / n if n else 0.0
        if together[0]:
            p(f"\nSwapped or truncated, found by either: {together[1]} of {together[0]} "
              f"({100 * together[1] / together[0]:.1f}%) at {100 * false_alarms:.1f}% false alarms.")
        p("")
    text = "\n".join(out)
    print(text)
    if args.out:
        open(args.out, "w").write(text + "\n")


def solve(a, b):
    """x with a x = b (Gaussian elimination with partial pivoting; a is small)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[c][c]:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(args):
    rows = []
    for d in args.dev:
        truth, _, ranked, _ = load(d)
        for line, kind in truth.items():
            if kind in ("clean", "swap", "truncate") and line in ranked:
                rows.append((kind != "clean", ranked[line]))
    if not rows or any(k not in rows[0][1] for k in ("gap", "length", "foreign", "rival")):
        sys.exit("check_po_faults fit: the dev checkpo.json files need gap, length, foreign and rival (nmt check-po --json)")
    lengths = sorted(e["length"] for bad, e in rows if not bad)
    centre = lengths[len(lengths) // 2]
    x = [[1.0, e["gap"], min(0.0, e["length"] - centre), max(0.0, e["length"] - centre), e["foreign"]]
         for _, e in rows]
    y = [1.0 if bad else 0.0 for bad, _ in rows]
    # Both classes weigh the same in all (faults are a few percent of entries).
    n_bad = sum(y)
    cw = [(len(y) - n_bad) / n_bad if t else 1.0 for t in y]
    n = len(x[0])
    w = [0.0] * n
    for _ in range(30):  # Newton's method (IRLS), with a small ridge on the slopes
        h = [[1e-4 * (i == j and i > 0) * len(y) for j in range(n)] for i in range(n)]
        g = [1e-4 * len(y) * w[i] * (i > 0) for i in range(n)]
        for xi, yi, ci in zip(x, y, cw):
            z = sum(a * b for a, b in zip(w, xi))
            p = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
            for i in range(n):
                g[i] += ci * (p - yi) * xi[i]
                for j in range(n):
                    h[i][j] += ci * p * (1 - p) * xi[i] * xi[j]
        step = solve(h, g)
        w = [a - b for a, b in zip(w, step)]
    # The fault's log-odds w . x rise as the gap falls (w[1] < 0); the ranking
    # key is -(w . x) / -w[1] less its constant: gap + kShortWeight * below
    # - kLongWeight * above - kForeignWeight * foreign.
    s = -w[1]
    print(f"entries: {len(y) - int(n_bad)} clean, {int(n_bad)} swapped or truncated")
    print(f"kLengthCentre = {centre:.2f}")
    print(f"kShortWeight = {-w[2] / s:.2f}  (per unit of log length below the centre)")
    print(f"kLongWeight = {w[3] / s:.2f}  (above it)")
    print(f"kForeignWeight = {w[4] / s:.2f}")
    # The rival's weight, with the others fixed: the one that finds most dev
    # faults at 5% dev false alarms (the operating point of the report).
    short, long_, foreign = -w[2] / s, w[3] / s, w[4] / s

    def key(e, rw):
        off = e["length"] - centre
        return (e["gap"] + short * min(0.0, off) - long_ * max(0.0, off) - foreign * e["foreign"]
                - rw * max(0.0, e["rival"] or 0.0))

    found = {}
    for rw in [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0]:
        clean = sorted(key(e, rw) for bad, e in rows if not bad)
        threshold = clean[int(0.05 * len(clean))]
        found[rw] = sum(key(e, rw) < threshold for bad, e in rows if bad) / n_bad
    print("kRivalWeight = %.1f  (dev faults found at 5%% dev false alarms: %s)" % (
        max(found, key=lambda rw: (found[rw], -rw)), ", ".join(f"{rw:g}: {100 * v:.1f}%" for rw, v in found.items())))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("inject")
    a.add_argument("clean")
    a.add_argument("faulty")
    a.add_argument("truth")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--per-kind", type=int, default=10)
    f = sub.add_parser("fit")
    f.add_argument("--dev", nargs="+", required=True)
    r = sub.add_parser("report")
    r.add_argument("--dev", nargs="+", required=True)
    r.add_argument("--test", nargs="+", required=True)
    r.add_argument("--out")
    args = ap.parse_args()
    {"inject": inject, "fit": fit, "report": report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
