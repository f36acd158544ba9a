#!/usr/bin/env python3
"""Independent corpus BLEU for tests/bleu_test.cpp: NLTK's corpus_bleu.

Usage: bleu_reference.py HYP_FILE REF_FILE   (one sentence per line)
Prints BLEU x 100 with 6 decimals. Exit 3 when the input falls outside the
region where NLTK's definition equals sacreBLEU's (see below); exit 4 when
NLTK is missing.

The input must be pre-tokenized text on which sacreBLEU's 13a tokenizer is
the identity (the C++ test checks that), so a whitespace split gives the
same tokens sacreBLEU would use. On such text NLTK's corpus_bleu with
SmoothingFunction().method3 (NIST geometric smoothing: the k-th order
without matches gets 1 / (2^k * total)) computes sacreBLEU's default BLEU
("exp" smoothing), with two differences in definition that this script
handles explicitly rather than hiding:

1. NLTK's modified_precision counts max(1, number of hypothesis n-grams)
   per sentence, so a hypothesis with 1..3 tokens adds a phantom n-gram to
   the higher orders' totals; sacreBLEU adds none. Such input is refused
   (exit 3); the C++ test keeps every non-empty hypothesis at >= 4 tokens
   and covers short ones with hand-computed cases.
2. For the same reason an empty hypothesis would add 1 to every total.
   Empty hypotheses are therefore left out of NLTK's call, and only their
   reference lengths are put back into the brevity penalty (which is a
   separate factor: BLEU = BP * exp(mean log p_n)), using NLTK's own
   brevity_penalty.
"""

import sys


def read_lines(path):
    # Only "\n" ends a line: str.splitlines() would also split at U+2028 etc.
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def main(argv):
    if len(argv) != 3:
        print("usage: bleu_reference.py HYP_FILE REF_FILE", file=sys.stderr)
        return 2
    try:
        from nltk.translate.bleu_score import (SmoothingFunction, brevity_penalty,
                                               corpus_bleu)
    except ImportError as e:
        print(f"bleu_reference.py: nltk not available: {e}", file=sys.stderr)
        return 4

    hyps = [line.split() for line in read_lines(argv[1])]
    refs = [line.split() for line in read_lines(argv[2])]
    if len(hyps) != len(refs):
        print(f"bleu_reference.py: {len(hyps)} hypotheses but {len(refs)} references",
              file=sys.stderr)
        return 2
    for i, h in enumerate(hyps):
        if 0 < len(h) < 4:
            print(f"bleu_reference.py: {argv[1]}:{i + 1}: hypothesis of {len(h)} tokens; "
                  "NLTK's per-sentence max(1, count) differs from sacreBLEU there",
                  file=sys.stderr)
            return 3

    kept = [(h, r) for h, r in zip(hyps, refs) if h]
    hyp_len = sum(len(h) for h, _ in kept)
    ref_len_all = sum(len(r) for r in refs)
    ref_len_kept = sum(len(r) for _, r in kept)

    score = corpus_bleu([[r] for _, r in kept], [h for h, _ in kept],
                        smoothing_function=SmoothingFunction().method3)
    if score > 0:
        # Swap NLTK's brevity penalty (kept pairs only) for the full corpus one.
        score = score / brevity_penalty(ref_len_kept, hyp_len) * brevity_penalty(ref_len_all, hyp_len)
    print(f"{score * 100:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
