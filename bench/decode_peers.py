"""Decoding side by side: `nmt translate` (--compute-type float32, bf16 and
int8) against CTranslate2 on the same model exported with `nmt export
--format ctranslate2` (float32 and int8), CPU, the same threads, greedy and
beam search (--beams, default 4), batch 32 and batch 1.

For each case: sentences/s and target tokens/s (median of --repeats runs,
interleaved across the systems, each timed around tokenize + translate +
detokenize, model load excluded:
nmt by its own "translated N lines in S s" log line), BLEU and chrF2 against
the references (sacreBLEU), the ratio nmt / CTranslate2 in the same compute
type (nmt float32 over CTranslate2 float32, nmt int8 over CTranslate2 int8),
and the share of
lines nmt float32 and CTranslate2 float32 translate identically, with every
differing line listed in the report's appendix.

--isa avx2: both held to AVX2 on an AVX-512 machine, as on an AVX2-only CPU,
by the settings bench/avx2_env.sh exports (bench_decode_peers.sh sources it
before this script starts); nmt bf16 is left out (it needs AVX-512).

Both stop at the same length: nmt with --max-len L --max-len-factor 0,
CTranslate2 with max_decoding_length L; no length penalty on either side.
CTranslate2 is tuned as its documentation suggests for a CPU: intra_threads =
threads with inter_threads = 1, and inter_threads = threads with
intra_threads = 1 (batches side by side); the faster setting is reported.
nmt runs as `nmt translate` does by default (batches side by side, one per
thread; --parallel-batches).

Usage: decode_peers.py NMT CHECKPOINT EXPORT_DIR SRC REF OUT_MD
       [--threads N] [--repeats R] [--max-len L] [--lines greedy32,greedy1,beam32,beam1]
       [--beams K1,K2,...] [--isa native|avx2]
Run it through bench/bench_decode_peers.sh, which exports the model and
picks the environment.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import ctranslate2
import sacrebleu
import sentencepiece as spm

ap = argparse.ArgumentParser()
ap.add_argument("nmt")
ap.add_argument("checkpoint")
ap.add_argument("export_dir")
ap.add_argument("src")
ap.add_argument("ref")
ap.add_argument("out_md")
ap.add_argument("--threads", type=int, default=os.cpu_count())
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--max-len", type=int, default=160)
ap.add_argument("--lines", default="2000,300,500,100",
                help="lines for greedy b32, greedy b1, beam b32, beam b1 (0 skips a case)")
ap.add_argument("--beams", default="4", help="beam widths of the beam cases (comma-separated)")
ap.add_argument("--isa", choices=("native", "avx2"), default="native",
                help="avx2: both systems held to AVX2 kernels (what an AVX2-only CPU runs)")
args = ap.parse_args()
if args.isa == "avx2" and "AVX2_SETTINGS" not in os.environ:
    raise SystemExit("decode_peers.py: --isa avx2 needs bench/avx2_env.sh's settings (run bench/bench_decode_peers.sh)")

src_all = [l.rstrip("\n") for l in open(args.src, encoding="utf-8")]
ref_all = [l.rstrip("\n") for l in open(args.ref, encoding="utf-8")]
n_g32, n_g1, n_b32, n_b1 = (int(x) for x in args.lines.split(","))
beams = [int(b) for b in args.beams.split(",")]
cases = [("greedy", 1, 32, n_g32), ("greedy", 1, 1, n_g1)]
for k in beams:
    cases += [(f"beam {k}", k, 32, n_b32), (f"beam {k}", k, 1, n_b1)]
cases = [c for c in cases if c[3] > 0]  # 0 lines: the case is skipped

# A placeholder-protected model reads sentinels where the line has %s, {name},
# <b>...: the export carries placeholders.py, which masks the sources and
# restores the translations as nmt does (inside CTranslate2's timed run, as
# nmt's own masking is inside its).
placeholders = None
if os.path.exists(f"{args.export_dir}/placeholders.py"):
    import importlib.util
    spec = importlib.util.spec_from_file_location("placeholders", f"{args.export_dir}/placeholders.py")
    placeholders = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(placeholders)
src_sp = spm.SentencePieceProcessor(model_file=f"{args.export_dir}/src.model")
tgt_sp = spm.SentencePieceProcessor(model_file=f"{args.export_dir}/tgt.model")
specials = {tgt_sp.id_to_piece(i) for i in range(4)}
tmp = tempfile.mkdtemp()


def pieces_out(lines):
    return sum(len(tgt_sp.encode(l)) for l in lines)


def run_nmt(lines, beam, batch, compute_type):
    """One timed run: (translations, seconds)."""
    inp = os.path.join(tmp, "in.zh")
    out = os.path.join(tmp, "out.en")
    open(inp, "w", encoding="utf-8").write("".join(l + "\n" for l in lines))
    p = subprocess.run([args.nmt, "translate", "--checkpoint", args.checkpoint, "--input", inp,
                        "--output", out, "--beam", str(beam if beam > 1 else 0), "--batch-size", str(batch),
                        "--max-len", str(args.max_len), "--max-len-factor", "0",
                        "--threads", str(args.threads), "--compute-type", compute_type],
                       capture_output=True, text=True, check=True)
    sec = float(re.search(r"translated \d+ lines in ([0-9.]+) s", p.stderr).group(1))
    return [l.rstrip("\n") for l in open(out, encoding="utf-8")], sec


def run_ct2(lines, beam, batch, compute_type, inter, intra):
    """One timed run (model load excluded; one translator alive at a time,
    so an idle one's thread pools never share the cores with the one timed)."""
    t = ctranslate2.Translator(args.export_dir, device="cpu", compute_type=compute_type,
                               inter_threads=inter, intra_threads=intra)
    t0 = time.perf_counter()
    masked = [placeholders.mask(l) for l in lines] if placeholders else None
    toks = [src_sp.encode(m.text if masked else l, out_type=str) for l, m in zip(lines, masked or lines)]
    res = t.translate_batch(toks, beam_size=beam, max_batch_size=batch, batch_type="examples",
                            max_decoding_length=args.max_len, length_penalty=0)
    out = [tgt_sp.decode([p for p in r.hypotheses[0] if p not in specials]) for r in res]
    if masked:
        out = [placeholders.restore(o, m) for o, m in zip(out, masked)]
    sec = time.perf_counter() - t0
    del t
    return out, sec


# The systems of a case, each (name, setting, run(lines, beam, batch)).
systems = [(f"nmt {ct}", f"--threads {args.threads}", lambda l, b, n, ct=ct: run_nmt(l, b, n, ct))
           for ct in (("float32", "int8") if args.isa == "avx2" else ("float32", "bf16", "int8"))]
ct2_settings = [(1, args.threads)] + ([(args.threads, 1)] if args.threads > 1 else [])
for ct in ("float32", "int8"):
    for inter, intra in ct2_settings:
        systems.append((f"CTranslate2 {ct}", f"inter {inter} × intra {intra}",
                        lambda l, b, n, ct=ct, i=inter, j=intra: run_ct2(l, b, n, ct, i, j)))

rows, diffs = [], []
for label, beam, batch, n in cases:
    lines, refs = src_all[:n], ref_all[:n]
    # Repeats interleaved (every system once, then again): a slow spell of
    # the machine falls on all of them, not on one system's runs.
    times = {i: [] for i in range(len(systems))}
    outs = {}
    for _ in range(args.repeats):
        for i, (_, _, run) in enumerate(systems):
            out, sec = run(lines, beam, batch)
            outs[i] = out
            times[i].append(sec)
    # Per system, its median; for CTranslate2 the faster of its settings.
    results = {}
    for i, (name, setting, _) in enumerate(systems):
        sec = statistics.median(times[i])
        if name not in results or sec < results[name][1]:
            results[name] = (outs[i], sec, setting)
    base = results["nmt float32"]
    same = sum(a == b for a, b in zip(base[0], results["CTranslate2 float32"][0]))
    for i, (a, b) in enumerate(zip(base[0], results["CTranslate2 float32"][0])):
        if a != b:
            diffs.append((f"{label}, batch {batch}", i + 1, lines[i], a, b))
    for name, r in results.items():
        out, sec = r[0], r[1]
        rows.append({
            "case": f"{label}, batch {batch} ({n} lines)", "system": name, "setting": r[2],
            "sent_s": n / sec, "tok_s": pieces_out(out) / sec,
            "bleu": sacrebleu.corpus_bleu(out, [refs]).score, "chrf": sacrebleu.corpus_chrf(out, [refs]).score,
            "same": f"{same}/{n}" if name == "CTranslate2 float32" else None,
            # nmt in the same compute type over this row
            "ratio": sec / results["nmt " + name.split()[-1]][1] if name.startswith("CTranslate2") else None,
        })
    print(f"{label} batch {batch}: " + ", ".join(f"{k} {n / v[1]:.1f}" for k, v in results.items())
          + f" sentences/s; nmt float32 identical to CTranslate2 float32: {same}/{n}", flush=True)

with open(args.out_md, "w", encoding="utf-8") as f:
    f.write("# Decoding: nmt against CTranslate2 on the same model\n\n")
    isa = " --isa avx2" if args.isa == "avx2" else ""
    f.write(f"Command: `bench/bench_decode_peers.sh {args.checkpoint} --beams {args.beams} --lines {args.lines}{isa}` "
            f"(threads {args.threads}, median of {args.repeats} runs, max length {args.max_len}, "
            f"no length penalty; ctranslate2 {ctranslate2.__version__}, sacrebleu {sacrebleu.__version__}).\n")
    if args.isa == "avx2":
        f.write(f"Both held to AVX2 kernels ({os.environ['AVX2_SETTINGS']}), as an AVX2-only CPU runs them; "
                "nmt bf16 needs AVX-512 and is left out.\n")
    f.write("Ratio: the sentences/s of nmt in the row's compute type over the row's; above 1 means nmt is faster.\n\n")
    f.write("| case | system | setting | sentences/s | tokens/s | BLEU | chrF2 | nmt ÷ this | lines identical to nmt float32 |\n")
    f.write("|---|---|---|--:|--:|--:|--:|--:|--:|\n")
    for r in rows:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        same = "" if r["same"] is None else r["same"]
        f.write(f"| {r['case']} | {r['system']} | {r['setting']} | {r['sent_s']:.1f} | {r['tok_s']:,.0f} | "
                f"{r['bleu']:.2f} | {r['chrf']:.2f} | {ratio} | {same} |\n")
    f.write(f"\n## Lines where nmt float32 and CTranslate2 float32 differ ({len(diffs)})\n\n")
    for case, i, s, a, b in diffs:
        f.write(f"- {case}, line {i}: `{s}`\n  - nmt: `{a}`\n  - CTranslate2: `{b}`\n")
print(open(args.out_md, encoding="utf-8").read())
