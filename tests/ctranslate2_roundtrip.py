"""Translates with CTranslate2 from a folder written by `nmt export` and
compares with `nmt translate` on the same checkpoint, line by line.

Usage: ctranslate2_roundtrip.py EXPORT_DIR SOURCE_FILE NMT_GREEDY NMT_BEAM4 MAX_LEN NMT_LOGPROBS
(the two NMT files were written with --max-len MAX_LEN --max-len-factor 0,
greedy and --beam 4; CTranslate2 gets max_decoding_length MAX_LEN and no
length penalty, as nmt's default). NMT_LOGPROBS: per line, nmt's
teacher-forced log-probabilities of the greedy translation's tokens and <end>
(tests/teacher_forced_logprobs.cpp), compared with CTranslate2's score_batch:
identical outputs can hide a small mapping error (an untrained LayerNorm is
close to identity), log-probabilities cannot. Exit 0 when every line is
identical and every log-probability agrees within 1e-4 (float32: about
2e-6 here; two LayerNorms swapped: 5e-3).

A placeholder-protected export ships placeholders.py: the sources are masked
and the translations restored with it (the NMT files then come from
`nmt translate --no-placeholder-constraint`, since CTranslate2 cannot
constrain), and then the helper's own `translate` command must give the
greedy file too. At least one greedy translation must have placed a
sentinel, or the restore step went untested.
"""
import importlib.util
import os
import subprocess
import sys

import ctranslate2
import sentencepiece as spm

folder, source, greedy_file, beam_file, max_len, logprob_file = sys.argv[1:7]
translator = ctranslate2.Translator(folder, device="cpu", intra_threads=1)
src_sp = spm.SentencePieceProcessor(model_file=f"{folder}/src.model")
tgt_sp = spm.SentencePieceProcessor(model_file=f"{folder}/tgt.model")
lines = [l.rstrip("\n") for l in open(source, encoding="utf-8")]
helper = None
if os.path.exists(f"{folder}/placeholders.py"):
    spec = importlib.util.spec_from_file_location("placeholders", f"{folder}/placeholders.py")
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
masks = [helper.mask(l) if helper else None for l in lines]
pieces = [src_sp.encode(m.text if m else l, out_type=str) for l, m in zip(lines, masks)]
placed = 0

specials = {tgt_sp.id_to_piece(i) for i in range(4)}  # <pad> <unk> <start> <end>
failed = False
for label, beam, path in (("greedy", 1, greedy_file), ("beam 4", 4, beam_file)):
    ours = [l.rstrip("\n") for l in open(path, encoding="utf-8")]
    results = translator.translate_batch(pieces, beam_size=beam, max_decoding_length=int(max_len),
                                         length_penalty=0)
    # nmt's detokenizer drops the special pieces (<unk> too, which
    # SentencePiece would print as " ⁇ "): the same here.
    theirs = [tgt_sp.decode([p for p in r.hypotheses[0] if p not in specials]) for r in results]
    if helper:
        if beam == 1:
            placed = sum(bool(helper.sentinels_in(t)) for t in theirs)
        theirs = [helper.restore(t, m) for t, m in zip(theirs, masks)]
    same = sum(a == b for a, b in zip(ours, theirs))
    print(f"{label}: {same} of {len(lines)} translations identical to nmt translate")
    if same != len(lines) or len(ours) != len(lines):
        failed = True
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if a != b:
                print(f"  line {i + 1}: nmt {a!r}\n          ctranslate2 {b!r}")
                break
ours = [[float(x) for x in l.split()] for l in open(logprob_file)]
greedy = [l.rstrip("\n") for l in open(greedy_file, encoding="utf-8")]
if helper:
    greedy = [helper.mask_target(h, m) for h, m in zip(greedy, masks)]
scored = translator.score_batch(pieces, [tgt_sp.encode(h, out_type=str) for h in greedy])
worst, where = 0.0, None
for i, (a, r) in enumerate(zip(ours, scored)):
    if len(a) != len(r.log_probs):
        print(f"line {i + 1}: nmt scored {len(a)} tokens, CTranslate2 {len(r.log_probs)}")
        failed = True
        continue
    for x, y in zip(a, r.log_probs):
        if abs(x - y) > worst:
            worst, where = abs(x - y), i + 1
tokens = sum(len(a) for a in ours)
print(f"teacher-forced log-probabilities of {tokens} tokens: largest difference {worst:.2e} (line {where})")
if worst > 1e-4 or len(ours) != len(lines):
    failed = True
if helper:
    print(f"placeholders.py: {placed} of {len(lines)} greedy translations placed sentinels, restored")
    with open(source, "rb") as f:
        run = subprocess.run([sys.executable, f"{folder}/placeholders.py", "translate", "--max-len", max_len,
                              "--batch-size", str(len(lines)), "--threads", "1"], stdin=f, capture_output=True)
    ours = open(greedy_file, "rb").read()
    same = run.returncode == 0 and run.stdout == ours
    print(f"placeholders.py translate: exit {run.returncode}, output {'identical to' if same else 'differs from'} "
          f"nmt translate's; {run.stderr.decode().count('lost')} lines named as having lost a placeholder")
    if not same:
        print(run.stderr.decode()[-2000:])
    failed = failed or placed == 0 or not same
sys.exit(1 if failed else 0)
