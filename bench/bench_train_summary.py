#!/usr/bin/python3
"""Summarizes bench/bench_train.sh's CSV: median tokens/s per trainer and
precision, and nmt's ratios over the PyTorch script measured in the same run.

Usage: bench_train_summary.py TRAIN.csv [--minutes M]   (Markdown on stdout)
"""
import argparse
import collections
import csv
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--minutes", default="?")
    a = ap.parse_args()
    runs = collections.defaultdict(list)
    with open(a.csv, newline="") as f:
        for row in csv.DictReader(f):
            runs[(row["config"], row["trainer"], row["precision"], row["threads_env"])].append(
                float(row["tokens_per_s"]))
    med = {k: statistics.median(v) for k, v in runs.items()}
    names = {("nmt", "nmt"): "nmt", ("torch", "default"): "PyTorch script",
             ("torch", "tuned"): "PyTorch script, nmt's thread settings"}
    out = [f"Training tokens/s (non-pad source + target tokens per second of training; "
           f"median of the repeats, {a.minutes}-minute runs interleaved in one run):", ""]
    for config in sorted({k[0] for k in med}):
        out += [f"### {config}", "", "| trainer | precision | runs | tokens/s (median) | all runs |",
                "|---|---|--:|--:|---|"]
        for k in sorted(k for k in med if k[0] == config):
            out.append(f"| {names[(k[1], k[3])]} | {k[2]} | {len(runs[k])} | {med[k]:.0f} | "
                       + ", ".join(f"{x:.0f}" for x in runs[k]) + " |")
        base = med.get((config, "torch", "float32", "default"))
        tuned = med.get((config, "torch", "float32", "tuned"))
        out += ["", "| ratio | value | bar |", "|---|--:|--:|"]
        for prec, bar in (("float32", 1.5), ("bf16", 2.5)):
            ours = med.get((config, "nmt", prec, "nmt"))
            if ours and base:
                verdict = "met" if ours / base >= bar else "MISSED"
                out.append(f"| nmt {prec} / PyTorch float32 | {ours / base:.2f}x | >= {bar}x ({verdict}) |")
            if ours and tuned:
                out.append(f"| nmt {prec} / PyTorch float32 with nmt's thread settings | {ours / tuned:.2f}x | |")
        ours, torch_bf16 = med.get((config, "nmt", "bf16", "nmt")), med.get((config, "torch", "bf16", "default"))
        if ours and torch_bf16:
            out.append(f"| nmt bf16 / PyTorch bf16 (autocast) | {ours / torch_bf16:.2f}x | |")
        out.append("")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
