#!/usr/bin/python3
"""Draws an `nmt bench-attention` CSV: time and peak memory against sequence
length, plus a markdown table, next to the CSV.

    bench/plot_bench.py docs/bench/cpu.csv
      -> docs/bench/cpu_time.svg, docs/bench/cpu_memory.svg, docs/bench/cpu.md

Uses matplotlib when this Python has it; otherwise writes the SVG by hand, so
that the benchmark never needs anything installed beyond python3.
"""
import csv
import math
import os
import platform
import subprocess
import sys
from xml.sax.saxutils import escape

COLUMNS = ["backend", "device", "pass", "batch", "heads", "q_len", "k_len", "head_dim",
           "causal", "ms_median", "gflops", "peak_mb"]
COLORS = {"torch": "#1f77b4", "naive": "#ff7f0e", "flash": "#2ca02c"}
DASH = {"fwd": None, "fwd+bwd": "6,4"}


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            sys.exit(f"plot_bench: {path}: no column {', '.join(missing)} (has {reader.fieldnames})")
        rows = []
        for r in reader:
            for key in ("batch", "heads", "q_len", "k_len", "head_dim", "causal"):
                r[key] = int(r[key])
            for key in ("ms_median", "gflops", "peak_mb"):
                r[key] = float(r[key])
            rows.append(r)
    return rows


def series(rows, value):
    """{(backend, pass): [(T, value per batch*head)]} for non-causal D=64
    self-attention. Per batch*head, because the long sequences run at B=1 and
    the others at B=8: attention's time and memory both scale linearly in B*H,
    so this keeps one line per backend and pass across all T."""
    best = {}
    for r in rows:
        if r["backend"] == "sgemm" or r["causal"] or r["q_len"] != r["k_len"] or r["head_dim"] != 64:
            continue
        key = (r["backend"], r["pass"], r["q_len"])
        if key not in best or r["batch"] * r["heads"] > best[key]["batch"] * best[key]["heads"]:
            best[key] = r  # the larger batch measures more work, so less noise
    out = {}
    for (backend, pas, t), r in sorted(best.items(), key=lambda kv: kv[0][2]):
        v = r[value] / (r["batch"] * r["heads"])
        if v > 0:  # a log axis cannot show 0 (no measurable growth)
            out.setdefault((backend, pas), []).append((t, v))
    order = {"torch": 0, "naive": 1, "flash": 2}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])))


# ---------------------------------------------------------------- hand SVG

def svg_plot(path, data, title, ylabel):
    w, h = 760, 500
    left, right, top, bottom = 80, 200, 50, 60
    pw, ph = w - left - right, h - top - bottom
    xs = sorted({t for pts in data.values() for t, _ in pts})
    ys = [v for pts in data.values() for _, v in pts]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left + pw / 2}" y="24" text-anchor="middle" font-size="14">{escape(title)}</text>']
    if not xs:
        out.append(f'<text x="{w / 2}" y="{h / 2}" text-anchor="middle">no data</text></svg>')
        write_text(path, "\n".join(out) + "\n")
        return
    x0, x1 = math.log10(xs[0]) - 0.1, math.log10(xs[-1]) + 0.1
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if y1 == y0:
        y1 += 1

    def px(t):
        return left + (math.log10(t) - x0) / (x1 - x0) * pw

    def py(v):
        return top + ph - (math.log10(v) - y0) / (y1 - y0) * ph

    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    for e in range(y0, y1 + 1):  # decades, with faint 2x and 5x lines between
        for m in (1, 2, 5):
            v = m * 10.0 ** e
            if e == y1 and m > 1:
                break
            y = py(v)
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" '
                       f'stroke="{"#ccc" if m == 1 else "#eee"}"/>')
            if m == 1:
                out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
    for t in xs:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">{t}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 14}" text-anchor="middle">'
               f'sequence length T (log)</text>')
    out.append(f'<text transform="translate(20,{top + ph / 2}) rotate(-90)" text-anchor="middle">'
               f'{escape(ylabel)} (log)</text>')
    for i, ((backend, pas), pts) in enumerate(data.items()):
        color = COLORS.get(backend, "#555")
        dash = f' stroke-dasharray="{DASH[pas]}"' if DASH.get(pas) else ""
        coords = " ".join(f"{px(t):.1f},{py(v):.1f}" for t, v in pts)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for t, v in pts:
            out.append(f'<circle cx="{px(t):.1f}" cy="{py(v):.1f}" r="3.5" fill="{color}">'
                       f'<title>{backend} {pas} T={t}: {v:.4g}</title></circle>')
        ly = top + 10 + 20 * i
        lx = left + pw + 15
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 30}" y2="{ly}" stroke="{color}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 38}" y="{ly + 4}">{escape(backend + " " + pas)}</text>')
    out.append("</svg>")
    write_text(path, "\n".join(out) + "\n")


def mpl_plot(plt, path, data, title, ylabel):
    fig, ax = plt.subplots(figsize=(7.6, 5.0))
    for (backend, pas), pts in data.items():
        ax.plot([t for t, _ in pts], [v for _, v in pts], marker="o",
                color=COLORS.get(backend, "#555"), linestyle="--" if pas == "fwd+bwd" else "-",
                label=f"{backend} {pas}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    xs = sorted({t for pts in data.values() for t, _ in pts})
    ax.set_xticks(xs)
    ax.set_xticklabels([str(t) for t in xs])
    ax.set_xlabel("sequence length T (log)")
    ax.set_ylabel(ylabel + " (log)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if data:
        ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    tmp = path + ".tmp"
    fig.savefig(tmp, format="svg")
    plt.close(fig)
    os.replace(tmp, path)


def write_text(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # atomic: a reader never sees half a file


# ---------------------------------------------------------------- markdown

def find(rows, backend, pas, batch, t, causal, d=64):
    for r in rows:
        if (r["backend"], r["pass"], r["batch"], r["heads"], r["q_len"], r["k_len"], r["head_dim"],
                r["causal"]) == (backend, pas, batch, 8, t, t, d, causal):
            return r
    return None


def ratios(rows):
    """The same headline numbers `nmt bench-attention` prints at its end."""
    lines = []
    for pas in ("fwd", "fwd+bwd"):
        torch, flash = find(rows, "torch", pas, 8, 512, 0), find(rows, "flash", pas, 8, 512, 0)
        lines.append((f"flash {pas} speed-up vs torch (B=8 H=8 T=512 D=64)",
                      f"{torch['ms_median'] / flash['ms_median']:.2f}×" if torch and flash else "n/a"))
    sgemm = next((r for r in rows if r["backend"] == "sgemm"), None)
    flash = find(rows, "flash", "fwd", 8, 512, 0)
    lines.append(("flash fwd GFLOP/s as % of sgemm 1024³ (T=512)",
                  f"{100 * flash['gflops'] / sgemm['gflops']:.1f}% "
                  f"({flash['gflops']:.1f} / {sgemm['gflops']:.1f})" if flash and sgemm else "n/a"))
    nc, ca = find(rows, "flash", "fwd", 8, 2048, 0), find(rows, "flash", "fwd", 8, 2048, 1)
    lines.append(("flash fwd causal speed-up over non-causal (T=2048; 2× ideal)",
                  f"{nc['ms_median'] / ca['ms_median']:.2f}×" if nc and ca else "n/a"))
    long = [r for r in rows if r["backend"] == "flash" and r["pass"] == "fwd+bwd"
            and r["q_len"] == r["k_len"] == 16384]
    for r in long:
        lines.append((f"flash fwd+bwd peak memory (B={r['batch']} H={r['heads']} T=16384 "
                      f"D={r['head_dim']} causal={r['causal']})", f"{r['peak_mb']:.0f} MB"))
    if not long:
        lines.append(("flash fwd+bwd peak memory (T=16384)", "n/a"))
    return lines


def machine(device):
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    text = f"{cpu}, {os.cpu_count()} cores"
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(l.split()[1] for l in f if l.startswith("MemTotal:")))
        text += f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    if device == "cuda":
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout.strip()
            if gpu:
                text += f"; GPU: {gpu.splitlines()[0]}"
        except (OSError, subprocess.SubprocessError):
            pass
    return text


def markdown(rows, csv_name, stem, device, drawer):
    out = [f"# Attention benchmark: {device}", "",
           f"`nmt bench-attention` ({csv_name}, {len(rows)} rows) on {machine(device)}. "
           "Time is the median of the timed runs after warm-up; peak MB is the case's memory "
           "growth over its inputs, measured in a process of its own "
           "(resident memory on the CPU, the caching allocator's peak on CUDA). "
           "GFLOP/s counts 4·B·H·Tq·Tk·D per forward (half when causal) and 3.5× that for "
           "forward+backward.", ""]
    if stem.endswith("_quick"):
        out += ["This is a `--quick` run (the CI set: T ≤ 512, at most 3 repeats, one warm-up): "
                "it shows the harness works, not numbers to quote.", ""]
    out += ["| headline (same run) | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in ratios(rows)]
    out += ["", f"![time per batch·head vs T]({stem}_time.svg)",
            f"![peak memory per batch·head vs T]({stem}_memory.svg)", "",
            "Plots: non-causal D=64 self-attention, divided by batch·head so that one line "
            "runs across all T (each T at the largest batch measured: B=8, or B=1 for the "
            f"long sequences); drawn with {drawer}.", "",
            "| backend | pass | B | H | Tq | Tk | D | causal | ms (median) | GFLOP/s | peak MB |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        out.append(f"| {r['backend']} | {r['pass']} | {r['batch']} | {r['heads']} | {r['q_len']} "
                   f"| {r['k_len']} | {r['head_dim']} | {r['causal']} | {r['ms_median']:.3f} "
                   f"| {r['gflops']:.1f} | {r['peak_mb']:.1f} |")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot_bench.py RESULTS.csv")
    path = sys.argv[1]
    rows = read_rows(path)
    folder = os.path.dirname(path) or "."
    stem = os.path.splitext(os.path.basename(path))[0]
    devices = sorted({r["device"] for r in rows}) or ["?"]
    device = devices[0] if len(devices) == 1 else "+".join(devices)

    time_data = series(rows, "ms_median")
    mem_data = series(rows, "peak_mb")
    shape = "non-causal, H=8, D=64"
    title_t = f"attention time vs T ({device}, {shape})"
    title_m = f"attention peak memory vs T ({device}, {shape})"
    ylabel_t = "ms per batch·head"
    ylabel_m = "peak MB per batch·head"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        drawer = f"matplotlib {matplotlib.__version__}"
        mpl_plot(plt, os.path.join(folder, f"{stem}_time.svg"), time_data, title_t, ylabel_t)
        mpl_plot(plt, os.path.join(folder, f"{stem}_memory.svg"), mem_data, title_m, ylabel_m)
    except ImportError:
        drawer = "plot_bench.py's own SVG writer (no matplotlib here)"
        svg_plot(os.path.join(folder, f"{stem}_time.svg"), time_data, title_t, ylabel_t)
        svg_plot(os.path.join(folder, f"{stem}_memory.svg"), mem_data, title_m, ylabel_m)
    write_text(os.path.join(folder, f"{stem}.md"),
               markdown(rows, os.path.basename(path), stem, device, drawer))
    for name in (f"{stem}_time.svg", f"{stem}_memory.svg", f"{stem}.md"):
        print(f"plot_bench: wrote {os.path.join(folder, name)}")


if __name__ == "__main__":
    main()
