#!/usr/bin/python3
"""Summarizes bench/bench_train.sh's CSV: median tokens/s per trainer, mode
and precision, and nmt's ratios over the PyTorch runs measured in the same
run, with the goals (nmt bf16 >= 2.5x the best PyTorch 2.15 mode, nmt
float32 >= 1.5x PyTorch 2.15 eager float32; on AVX2 and AVX-512 alike, at
every size).

Usage: bench_train_summary.py TRAIN.csv [--minutes M]   (Markdown on stdout)
"""
import argparse
import collections
import csv
import math
import statistics
import sys

kBf16Goal = 2.5     # nmt bf16 over the best PyTorch 2.15 mode
kFloat32Goal = 1.5  # nmt float32 over PyTorch 2.15 eager float32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--minutes", default="?")
    a = ap.parse_args()
    runs = collections.defaultdict(list)
    by_repeat = collections.defaultdict(dict)  # (config, repeat) -> {(trainer, precision, env): tokens/s}
    with open(a.csv, newline="") as f:
        for row in csv.DictReader(f):
            runs[(row["config"], row["trainer"], row["precision"], row["threads_env"])].append(
                float(row["tokens_per_s"]))
            by_repeat[(row["config"], row["repeat"])][(row["trainer"], row["precision"], row["threads_env"])] = \
                float(row["tokens_per_s"])
    med = {k: statistics.median(v) for k, v in runs.items() if not any(math.isnan(x) for x in v)}
    names = {
        ("nmt", "nmt"): "nmt",
        ("torch2.15", "default"): "PyTorch 2.15 eager, as started",
        ("torch2.15", "tuned"): "PyTorch 2.15 eager, tuned",
        ("torch2.15-compile", "tuned"): "PyTorch 2.15 torch.compile, tuned",
        ("torch2.15-compile", "default"): "PyTorch 2.15 torch.compile, as started",
        ("torch1.13", "tuned"): "PyTorch 1.13 eager, tuned",
        # older CSVs (PyTorch 1.13 only)
        ("torch", "default"): "PyTorch script", ("torch", "tuned"): "PyTorch script, nmt's thread settings",
    }
    out = [f"Training tokens/s (non-pad source + target tokens per second of training; "
           f"median of the repeats, {a.minutes}-minute runs interleaved in one run):", ""]
    for config in sorted({k[0] for k in runs}):
        out += [f"### {config}", "", "| trainer | precision | runs | tokens/s (median) | all runs |",
                "|---|---|--:|--:|---|"]
        for k in sorted((k for k in runs if k[0] == config), key=lambda k: -med.get(k, 0)):
            shown = f"{med[k]:.0f}" if k in med else "failed"
            out.append(f"| {names.get((k[1], k[3]), k[1] + ' ' + k[3])} | {k[2]} | {len(runs[k])} | {shown} | "
                       + ", ".join(f"{x:.0f}" for x in runs[k]) + " |")
        peers = {k: v for k, v in med.items() if k[0] == config and k[1].startswith("torch2")}
        eager32 = max((v for k, v in peers.items() if k[1] == "torch2.15" and k[2] == "float32"), default=None)
        # the best mode overall, whichever environment and precision
        best = max(peers.items(), key=lambda kv: kv[1], default=None)
        t113 = med.get((config, "torch1.13", "float32", "tuned"))
        n32, n16 = med.get((config, "nmt", "float32", "nmt")), med.get((config, "nmt", "bf16", "nmt"))
        out += ["", "| ratio | value | goal |", "|---|--:|--:|"]
        if n16 and best:
            (_, tr, prec, env), v = best
            verdict = "met" if n16 / v >= kBf16Goal else f"MISSED by {100 * (1 - n16 / v / kBf16Goal):.0f}%"
            out.append(f"| nmt bf16 / best PyTorch 2.15 mode ({names[(tr, env)]}, {prec}) | {n16 / v:.2f}x | "
                       f">= {kBf16Goal}x ({verdict}) |")
        ours_best = max((v for v in (n32, n16) if v), default=None)
        if ours_best and best and n16:
            out.append(f"| nmt's best mode ({'bf16' if ours_best == n16 else 'float32'}) / best PyTorch 2.15 mode | "
                       f"{ours_best / best[1]:.2f}x | |")
        if n32 and eager32:
            verdict = "met" if n32 / eager32 >= kFloat32Goal else f"MISSED by {100 * (1 - n32 / eager32 / kFloat32Goal):.0f}%"
            out.append(f"| nmt float32 / PyTorch 2.15 eager float32 (the better of as started and tuned) | "
                       f"{n32 / eager32:.2f}x | >= {kFloat32Goal}x ({verdict}) |")
        for k, v in sorted(peers.items()):
            ours = n16 if k[2] == "bf16" else n32
            if ours:
                out.append(f"| nmt {k[2]} / {names[(k[1], k[3])]} {k[2]} | {ours / v:.2f}x | |")
        # The float32 ratio of each repeat alone (runs minutes apart, not the
        # medians of runs up to a repeat apart): its spread is the machine's drift.
        paired = []
        for (c, _), r in sorted(by_repeat.items(), key=lambda kv: int(kv[0][1])):
            peer = max((v for k, v in r.items() if k[0] == "torch2.15" and k[1] == "float32" and not math.isnan(v)),
                       default=None)
            ours = r.get(("nmt", "float32", "nmt"))
            if c == config and peer and ours and not math.isnan(ours):
                paired.append(ours / peer)
        if len(paired) > 1:
            out.append(f"| nmt float32 / PyTorch 2.15 eager float32, each repeat (median {statistics.median(paired):.2f}x) | "
                       + ", ".join(f"{x:.2f}x" for x in paired) + " | |")
        if n32 and t113:
            out.append(f"| nmt float32 / PyTorch 1.13 eager float32, tuned | {n32 / t113:.2f}x | |")
        out.append("")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
