#!/usr/bin/env python3
"""A large zh-en corpus for bench/bench_data.sh, made from data/real/train.

Usage: make_big_corpus.py repeat|distinct PAIRS OUT_PREFIX [--seed S]
  repeat    data/real/train's pairs over and over (37,099 distinct lines:
            the kindest case for SentencePiece's sample and for dedupe)
  distinct  every pair spliced from two random pairs of data/real/train: the
            first half of one (characters of the Chinese, words of the
            English) and the second half of another, so nearly every line
            is new while the text stays the catalogs' text
Writes OUT_PREFIX.zh and OUT_PREFIX.en. Standard library only.
"""
import random
import sys


def main(argv):
    if len(argv) < 4 or argv[1] not in ("repeat", "distinct"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, n, out = argv[1], int(argv[2]), argv[3]
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 1
    zh = open("data/real/train.zh", encoding="utf-8").read().split("\n")[:-1]
    en = open("data/real/train.en", encoding="utf-8").read().split("\n")[:-1]
    assert len(zh) == len(en)
    with open(out + ".zh", "w", encoding="utf-8") as fz, open(out + ".en", "w", encoding="utf-8") as fe:
        if mode == "repeat":
            block_zh, block_en = "\n".join(zh) + "\n", "\n".join(en) + "\n"
            full, rest = divmod(n, len(zh))
            for _ in range(full):
                fz.write(block_zh)
                fe.write(block_en)
            fz.write("".join(line + "\n" for line in zh[:rest]))
            fe.write("".join(line + "\n" for line in en[:rest]))
            return 0
        rnd = random.Random(seed)
        words = [e.split(" ") for e in en]
        m = len(zh)
        bz, be = [], []
        for i in range(n):
            a, b = rnd.randrange(m), rnd.randrange(m)
            za, zb, wa, wb = zh[a], zh[b], words[a], words[b]
            bz.append(za[: (len(za) + 1) // 2] + zb[len(zb) // 2:])
            be.append(" ".join(wa[: (len(wa) + 1) // 2] + wb[len(wb) // 2:]))
            if len(bz) == 100000:
                fz.write("\n".join(bz) + "\n")
                fe.write("\n".join(be) + "\n")
                bz, be = [], []
        if bz:
            fz.write("\n".join(bz) + "\n")
            fe.write("\n".join(be) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
