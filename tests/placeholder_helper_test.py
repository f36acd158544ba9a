"""The helper `nmt export` ships beside a protected model
(src/export/placeholders.py) masks and restores exactly as nmt does
(data/placeholder_mask.h, through tests/placeholder_mask_dump.cpp).

Usage: placeholder_helper_test.py PLACEHOLDER_MASK_DUMP SOURCE_DIR

Sources: every line of data/real and data/toy (both languages), and random
lines built from placeholder fragments. For each: the masked source, a
reference translation masked as a target, and a translation with sentinels
shuffled, dropped, repeated or foreign, restored. Exit 0 when all three agree
on every line, and enough lines carry placeholders for that to mean something.
"""
import os
import random
import subprocess
import sys
import tempfile

dump, src = sys.argv[1:3]
sys.path.insert(0, os.path.join(src, "src", "export"))
import placeholders as ph  # noqa: E402


def read(path):
    with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as f:
        return [l.rstrip("\n") for l in f]


pairs = []
for corpus in ("real", "toy"):
    for split in ("train", "valid", "test"):
        zh = read(os.path.join(src, "data", corpus, split + ".zh"))
        en = read(os.path.join(src, "data", corpus, split + ".en"))
        pairs += list(zip(zh, en)) + list(zip(en, zh))

rng = random.Random(7)
fragments = ["%", "%%", "%s", "%d", "%1$s", "%2$lu", "%3$.*1$s", "%*d", "%-5.2f", "%'d", "%<PRIu64>", "%(name)s",
             "%(x)r", "%m", "%ls", "%hhd", "%0$s", "%*0$d", "%25$s", "{", "}", "{0}", "{name!r:>10}", "{}", "${HOME}",
             "{FILE}", "{x.y[0]}", "{0:", "abcdefghij", "<b>", "</b>", "<span weight=\"bold\">", "<file>", "<i18n@x>", "&amp;", "&#39;",
             "&#x27;", "&toolongname;", "--force", "--Long", "a--b", "-", "$", "*", "1", "2$", "l", "ü", "中文", " ",
             "\t", "\\n", ph.sentinel(3), ph.sentinel(25), "\ue000", "\ufffd", "PRIdMAX", ">", "(", ")", ":"]
for _ in range(30000):
    line = "".join(rng.choice(fragments) for _ in range(rng.randint(1, 12)))
    pairs.append((line, "".join(rng.choice(fragments) for _ in range(rng.randint(0, 8)))))
# A format spec is read for at most 40 bytes (not characters).
for n in range(30, 46):
    pairs += [("{0:" + "x" * n + "} y", "{0:" + "x" * n + "}"), ("{0:" + "ü" * (n // 2) + "}", "z")]
# Lines with more printf arguments than there are sentinels stay as they are.
pairs.append((" ".join("%s" for _ in range(30)), "x"))
pairs.append((" ".join("<b>%d</b>{%d}" % (i, i) for i in range(30)), "y"))


def garble(masked):
    """A translation as a model might write it: the source's sentinels moved, dropped, repeated, or foreign ones."""
    ks = ph.sentinels_in(masked.text)
    choice = rng.randrange(5)
    if choice == 1:
        rng.shuffle(ks)
    elif choice == 2 and ks:
        ks.pop(rng.randrange(len(ks)))
    elif choice == 3 and ks:
        ks.insert(rng.randrange(len(ks) + 1), rng.choice(ks))
    elif choice == 4:
        ks.insert(rng.randrange(len(ks) + 1), rng.randint(1, ph.MAX_SENTINELS))
    return "word " + " x ".join(ph.sentinel(k) for k in ks) + " end"


with tempfile.TemporaryDirectory() as tmp:
    files = [os.path.join(tmp, n) for n in ("src", "tgt", "hyp")]
    expected = []
    hyps = []
    with_placeholders = 0
    for source, target in pairs:
        m = ph.mask(source)
        hyp = garble(m)
        hyps.append(hyp)
        expected.append((m.text, ph.mask_target(target, m), ph.restore(hyp, m)))
        with_placeholders += m.text != source
    for path, column in zip(files, ([p[0] for p in pairs], [p[1] for p in pairs], hyps)):
        with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="\n") as f:
            f.write("".join(l + "\n" for l in column))
    out = subprocess.run([dump] + files, check=True, stdout=subprocess.PIPE).stdout
got = [tuple(l.split("\x1f")) for l in out.decode("utf-8", "surrogateescape").split("\n")[:-1]]

names = ("masked source", "masked target", "restored translation")
wrong = [0, 0, 0]
shown = 0
for i, (a, b) in enumerate(zip(expected, got)):
    for f in range(3):
        if a[f] != b[f]:
            wrong[f] += 1
            if shown < 5:
                shown += 1
                print(f"line {i + 1} ({pairs[i][0]!r}): {names[f]}\n  helper {a[f]!r}\n  nmt    {b[f]!r}")
print(f"{len(pairs)} lines, {with_placeholders} with placeholders masked: "
      + ", ".join(f"{n} differs on {w}" for n, w in zip(names, wrong)))
ok = len(got) == len(pairs) and not any(wrong) and with_placeholders > 20000
sys.exit(0 if ok else 1)
