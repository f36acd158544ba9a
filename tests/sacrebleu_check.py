"""`nmt score` against sacreBLEU itself: corpus BLEU and chrF2 on the toy and
the real test sets must agree to 0.01.

The hypotheses are the references damaged in ways that exercise every part
of the metrics: words dropped and repeated (n-gram precisions, brevity
penalty), punctuation glued and split (13a tokenization), case changed,
lines shuffled against their references, empty lines, and, for the real set,
translations from a model (HYP_FILE) when given.
Usage: sacrebleu_check.py NMT SRC_DIR [LABEL:HYP:REF ...]
"""
import random
import re
import subprocess
import sys

import sacrebleu

nmt, src_dir = sys.argv[1:3]
extra = sys.argv[3:]


def damaged(refs, seed):
    rng = random.Random(seed)
    out = []
    for r in refs:
        words = r.split()
        kind = rng.randrange(7)
        if kind == 0 and words:
            del words[rng.randrange(len(words))]
        elif kind == 1 and words:
            i = rng.randrange(len(words))
            words.insert(i, words[i])
        elif kind == 2:
            words = [w.upper() if rng.random() < 0.3 else w for w in words]
        elif kind == 3:
            r2 = re.sub(r" ([,.!?;:])", r"\1", " ".join(words))  # glue punctuation
            words = r2.split()
        elif kind == 4:
            words = words[: max(0, len(words) // 2)]
        elif kind == 5 and rng.random() < 0.2:
            words = []
        out.append(" ".join(words))
    # a few lines against another line's reference
    for _ in range(max(1, len(out) // 20)):
        i, j = rng.randrange(len(out)), rng.randrange(len(out))
        out[i], out[j] = out[j], out[i]
    return out


def nmt_scores(hyp_path, ref_path):
    text = subprocess.run([nmt, "score", "--hyp", hyp_path, "--ref", ref_path], check=True,
                          capture_output=True, text=True).stdout
    bleu = float(re.search(r"^BLEU = ([0-9.]+)", text, re.M).group(1))
    chrf = float(re.search(r"^chrF2 = ([0-9.]+)", text, re.M).group(1))
    return bleu, chrf


cases = []
for name in ("toy", "real"):
    refs = [l.rstrip("\n") for l in open(f"{src_dir}/data/{name}/test.en", encoding="utf-8")]
    cases.append((f"{name} test, damaged references", damaged(refs, 7), refs))
for spec in extra:
    label, hyp_path, ref_path = spec.split(":", 2)
    cases.append((label, [l.rstrip("\n") for l in open(hyp_path, encoding="utf-8")],
                  [l.rstrip("\n") for l in open(ref_path, encoding="utf-8")]))

import tempfile, os
failed = False
with tempfile.TemporaryDirectory() as tmp:
    print(f"{'set':40} {'lines':>6} {'nmt BLEU':>9} {'sacreBLEU':>9} {'nmt chrF2':>9} {'sacreBLEU':>9}")
    for label, hyps, refs in cases:
        hp, rp = os.path.join(tmp, "hyp"), os.path.join(tmp, "ref")
        open(hp, "w", encoding="utf-8").write("".join(h + "\n" for h in hyps))
        open(rp, "w", encoding="utf-8").write("".join(r + "\n" for r in refs))
        ours_bleu, ours_chrf = nmt_scores(hp, rp)
        bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
        chrf = sacrebleu.corpus_chrf(hyps, [refs]).score
        print(f"{label:40} {len(hyps):6d} {ours_bleu:9.2f} {bleu:9.2f} {ours_chrf:9.2f} {chrf:9.2f}")
        if abs(ours_bleu - round(bleu, 2)) > 0.01 or abs(ours_chrf - round(chrf, 2)) > 0.01:
            failed = True
            print(f"  FAIL: differ by more than 0.01")
print(f"sacrebleu {sacrebleu.__version__}")
sys.exit(1 if failed else 0)
