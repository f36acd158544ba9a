#!/usr/bin/python3
"""Plot training curves from metrics JSON-lines files as one standalone SVG.

Usage: plot_metrics.py METRICS.jsonl [MORE.jsonl ...] -o OUT.svg
                       [--label NAME ...] [--x step|minutes] [--series KEY,KEY] [--title T]

Each line of a metrics file is an object such as
  {"step": 500, "epoch": 1, "train_loss": 2.31, "train_nll": 1.95, "train_seconds": 61.2}
  {"step": 500, "valid_loss": 1.9, "valid_bleu": 45.2, "train_seconds": 61.2}
as `nmt train` (and bench/torch_reference.py) write them: train_loss is the
label-smoothed objective, train_nll the plain cross-entropy that valid_loss
is too, so those two are the curves to compare. Any key may be
missing on a line; lines without the x key are skipped; null (a non-finite
value) breaks a line. Losses go on the left axis, BLEU/chrF/exact match on the
right. --x minutes plots against training time (train_seconds / 60), so runs
of different speed compare by wall time. With several files each series is
prefixed by its run's label (default: the file's folder name).

The old form `plot_metrics.py METRICS.jsonl OUT.svg` still works.
Standard library only. Exit 2 with a one-line message when a file is missing
or malformed.
"""

import json
import math
import os
import sys

FONT_FAMILY = "Noto Sans CJK SC, Source Han Sans SC, PingFang SC, Microsoft YaHei, sans-serif"
MARGIN = 16
TITLE_FONT = 16
LABEL_FONT = 13
TICK_FONT = 12
CHART_WIDTH = 860
CHART_HEIGHT = 480
MAX_MARKERS = 40
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]

# key -> (legend name, right axis). nmt's train_loss is the objective, with
# label smoothing (higher than the plain cross-entropy by design); train_nll
# is the plain cross-entropy, the same quantity as valid_loss.
KNOWN_SERIES = {"train_nll": ("train loss", False),
                "train_loss": ("train loss, label-smoothed", False),
                "valid_loss": ("valid loss", False),
                "valid_bleu": ("valid BLEU", True),
                "valid_chrf": ("valid chrF", True),
                "valid_exact": ("valid exact match %", True),
                "test_bleu": ("test BLEU", True)}
DEFAULT_SERIES = ["train_nll", "train_loss", "valid_loss", "valid_bleu"]


class InputError(Exception):
    pass


def xml_escape(text):
    out = []
    for ch in text:
        cp = ord(ch)
        if ch == "&":
            out.append("&amp;")
        elif ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch == '"':
            out.append("&quot;")
        elif ch == "'":
            out.append("&apos;")
        elif (cp < 0x20 and ch not in "\t\n\r") or cp in (0xFFFE, 0xFFFF) or 0xD800 <= cp <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def is_wide(cp):
    return (0x1100 <= cp <= 0x115F or 0x2E80 <= cp <= 0xA4CF or 0xAC00 <= cp <= 0xD7A3
            or 0xF900 <= cp <= 0xFAFF or 0xFE30 <= cp <= 0xFE4F or 0xFF00 <= cp <= 0xFF60
            or 0xFFE0 <= cp <= 0xFFE6 or 0x20000 <= cp <= 0x3FFFD)


def text_width(s, font):
    em = 0.0
    for ch in s:
        cp = ord(ch)
        if cp >= 0x80:
            em += 1.0 if is_wide(cp) else 0.62
        elif ch in "ijlI.,:;'|!` ":
            em += 0.32
        elif "A" <= ch <= "Z" or ch in "mw":
            em += 0.72
        else:
            em += 0.58
    return em * font


class Axis:
    """Bounds widened to multiples of a 1/2/5 step giving about five intervals."""

    def __init__(self, mn, mx):
        if not mn <= mx:
            mn, mx = 0.0, 1.0
        if mx - mn <= 1e-12 * max(1.0, abs(mx)):
            pad = max(abs(mn) * 0.05, 0.5)
            mn, mx = mn - pad, mx + pad
        raw = (mx - mn) / 5
        mag = 10.0 ** math.floor(math.log10(raw))
        norm = raw / mag
        self.step = (1 if norm < 1.5 else 2 if norm < 3 else 5 if norm < 7 else 10) * mag
        self.lo = math.floor(mn / self.step + 1e-9) * self.step
        self.hi = math.ceil(mx / self.step - 1e-9) * self.step

    def ticks(self):
        return [self.lo + k * self.step for k in range(round((self.hi - self.lo) / self.step) + 1)]

    def label(self, v):
        if abs(v) < self.step * 1e-6:
            v = 0.0
        if self.step >= 1000:
            return "0" if v == 0 else "%.0fk" % (v / 1000)
        decimals = max(0, math.ceil(-math.log10(self.step) - 1e-9))
        return "%.*f" % (decimals, v)


def finite_runs(xs, ys):
    runs = [[]]
    for x, y in zip(xs, ys):
        if math.isfinite(x) and math.isfinite(y):
            runs[-1].append((x, y))
        elif runs[-1]:
            runs.append([])
    if not runs[-1]:
        runs.pop()
    return runs


def decimate(pts, width_px):
    """Each pixel column's lowest and highest point, once points far outnumber pixels."""
    if len(pts) <= 4 * width_px:
        return pts
    out, i = [], 0
    while i < len(pts):
        column = math.floor(pts[i][0])
        lo = hi = j = i
        while j < len(pts) and math.floor(pts[j][0]) == column:
            if pts[j][1] < pts[lo][1]:
                lo = j
            if pts[j][1] > pts[hi][1]:
                hi = j
            j += 1
        out.append(pts[min(lo, hi)])
        if lo != hi:
            out.append(pts[max(lo, hi)])
        i = j
    return out


def line_chart_svg(series, title, x_label, left_label, right_label):
    """series: list of (name, xs, ys, right_axis)."""
    inf = math.inf
    runs = []
    x_min, x_max = inf, -inf
    y_min, y_max = [inf, inf], [-inf, -inf]
    has = [False, False]
    for _, xs, ys, right in series:
        runs.append(finite_runs(xs, ys))
        side = 1 if right else 0
        for run in runs[-1]:
            for x, y in run:
                x_min, x_max = min(x_min, x), max(x_max, x)
                y_min[side], y_max[side] = min(y_min[side], y), max(y_max[side], y)
                has[side] = True
    empty = not has[0] and not has[1]
    if empty:
        has[0] = True
    ax = Axis(x_min, x_max)
    ay = [Axis(y_min[0], y_max[0]), Axis(y_min[1], y_max[1])]

    def tick_labels_width(a):
        return max(text_width(a.label(t), TICK_FONT) for t in a.ticks())

    title_h = TITLE_FONT + 10 if title else 0
    legend = []
    lx, ly = MARGIN, MARGIN + title_h + 12
    for i, (name, _, _, right) in enumerate(series):
        if right and has[0]:
            name += " (right axis)"
        w = 34 + text_width(name, LABEL_FONT) + 18
        if lx > MARGIN and lx + w > CHART_WIDTH - MARGIN:
            lx, ly = MARGIN, ly + 20
        points = sum(len(r) for r in runs[i])
        legend.append((name, PALETTE[i % len(PALETTE)], lx, ly, points <= MAX_MARKERS))
        lx += w
    top = (ly + 14 if legend else MARGIN + title_h) + 8
    left = MARGIN + (LABEL_FONT + 8 if left_label else 0) + (tick_labels_width(ay[0]) + 8 if has[0] else 0)
    last_x_half = text_width(ax.label(ax.hi), TICK_FONT) / 2
    if has[1]:
        right = MARGIN + (LABEL_FONT + 8 if right_label else 0) + tick_labels_width(ay[1]) + 8
    else:
        right = max(MARGIN, last_x_half + 4)
    bottom = MARGIN + (LABEL_FONT + 8 if x_label else 0) + TICK_FONT + 8
    px0, px1, py0, py1 = left, CHART_WIDTH - right, top, CHART_HEIGHT - bottom

    def to_px(x):
        return px0 + (x - ax.lo) / (ax.hi - ax.lo) * (px1 - px0)

    def to_py(y, side):
        a = ay[side]
        return py1 - (y - a.lo) / (a.hi - a.lo) * (py1 - py0)

    o = ['<?xml version="1.0" encoding="UTF-8"?>\n',
         f'<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
         f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" font-family="{FONT_FAMILY}" font-size="{LABEL_FONT}">\n']
    if title:
        o.append(f"<title>{xml_escape(title)}</title>\n")
    o.append('<rect class="bg" width="100%" height="100%" fill="#ffffff"/>\n')
    if title:
        o.append(f'<text class="title" x="{CHART_WIDTH / 2:.1f}" y="{MARGIN + TITLE_FONT:.1f}" '
                 f'text-anchor="middle" font-size="{TITLE_FONT}" font-weight="bold">{xml_escape(title)}</text>\n')
    grid_side = 0 if has[0] else 1
    o.append('<g class="grid" stroke="#e6e6e6" stroke-width="1">\n')
    for t in ay[grid_side].ticks():
        y = to_py(t, grid_side)
        o.append(f'<line x1="{px0:.1f}" y1="{y:.1f}" x2="{px1:.1f}" y2="{y:.1f}"/>\n')
    for t in ax.ticks():
        x = to_px(t)
        o.append(f'<line x1="{x:.1f}" y1="{py0:.1f}" x2="{x:.1f}" y2="{py1:.1f}"/>\n')
    o.append("</g>\n")
    o.append(f'<rect class="frame" x="{px0:.1f}" y="{py0:.1f}" width="{px1 - px0:.1f}" '
             f'height="{py1 - py0:.1f}" fill="none" stroke="#888888"/>\n')
    o.append(f'<g class="ticks" font-size="{TICK_FONT}" fill="#333333">\n')
    for t in ax.ticks():
        o.append(f'<text x="{to_px(t):.1f}" y="{py1 + 6 + TICK_FONT:.1f}" text-anchor="middle">{ax.label(t)}</text>\n')
    for side in (0, 1):
        if not has[side]:
            continue
        for t in ay[side].ticks():
            x, anchor = (px0 - 6, "end") if side == 0 else (px1 + 6, "start")
            o.append(f'<text x="{x:.1f}" y="{to_py(t, side) + 0.35 * TICK_FONT:.1f}" '
                     f'text-anchor="{anchor}">{ay[side].label(t)}</text>\n')
    o.append("</g>\n")
    o.append('<g class="axis-labels">\n')
    if x_label:
        o.append(f'<text x="{(px0 + px1) / 2:.1f}" y="{CHART_HEIGHT - MARGIN:.1f}" '
                 f'text-anchor="middle">{xml_escape(x_label)}</text>\n')
    if left_label and has[0]:
        o.append(f'<text transform="translate({MARGIN + LABEL_FONT:.1f} {(py0 + py1) / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle">{xml_escape(left_label)}</text>\n')
    if right_label and has[1]:
        o.append(f'<text transform="translate({CHART_WIDTH - MARGIN - LABEL_FONT:.1f} {(py0 + py1) / 2:.1f}) '
                 f'rotate(90)" text-anchor="middle">{xml_escape(right_label)}</text>\n')
    o.append("</g>\n")
    for i, (_, _, _, right) in enumerate(series):
        c = PALETTE[i % len(PALETTE)]
        side = 1 if right else 0
        points = sum(len(r) for r in runs[i])
        o.append('<g class="series">\n')
        for run in runs[i]:
            px = decimate([(to_px(x), to_py(y, side)) for x, y in run], px1 - px0)
            pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in px)
            o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" stroke-linejoin="round" '
                     f'stroke-linecap="round" points="{pts}"/>\n')
            if points <= MAX_MARKERS:
                o.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"/>\n' for x, y in px)
        o.append("</g>\n")
    if empty:
        o.append(f'<text x="{(px0 + px1) / 2:.1f}" y="{(py0 + py1) / 2:.1f}" text-anchor="middle" '
                 'fill="#888888">no data</text>\n')
    o.append('<g class="legend">\n')
    for name, c, x, y, marker in legend:
        o.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x + 28:.1f}" y2="{y:.1f}" stroke="{c}" stroke-width="2"/>')
        if marker:
            o.append(f'<circle cx="{x + 14:.1f}" cy="{y:.1f}" r="3" fill="{c}"/>')
        o.append(f'<text x="{x + 34:.1f}" y="{y + 0.35 * LABEL_FONT:.1f}">{xml_escape(name)}</text>\n')
    o.append("</g>\n</svg>\n")
    return "".join(o)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def read_metrics(path, x_key, keys):
    """{key: ([x], [values])} for keys, in file order; null values become NaN."""
    data = {key: ([], []) for key in keys}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}")
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            # A running trainer appends a line at a time: an unended last
            # line may be one it is still writing.
            if n == len(lines) and not text.endswith("\n"):
                continue
            raise InputError(f"{path}:{n}: not JSON: {e.msg}")
        if not isinstance(rec, dict):
            raise InputError(f"{path}:{n}: expected a JSON object")
        if rec.get(x_key) is None:
            continue
        if not is_number(rec[x_key]):
            raise InputError(f"{path}:{n}: \"{x_key}\" is not a number")
        for key in keys:
            if key not in rec:
                continue
            value = rec[key]
            if value is not None and not is_number(value):
                raise InputError(f"{path}:{n}: \"{key}\" is not a number")
            data[key][0].append(float(rec[x_key]))
            data[key][1].append(math.nan if value is None else float(value))
    return data


def write_atomic(path, text):
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise InputError(f"cannot write {path}: {e.strerror or e}")


def parse_args(argv):
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise InputError(message)

    p = Parser(prog="plot_metrics.py", add_help=True)
    p.add_argument("files", nargs="+", metavar="METRICS.jsonl")
    p.add_argument("-o", "--output", metavar="OUT.svg")
    p.add_argument("--label", action="append", default=[], help="one per file, in order")
    p.add_argument("--x", choices=["step", "minutes"], default="step")
    p.add_argument("--series", default=",".join(DEFAULT_SERIES),
                   help="comma-separated keys: " + ", ".join(KNOWN_SERIES))
    p.add_argument("--title")
    a = p.parse_args(argv)
    if a.output is None:  # the old form: METRICS.jsonl OUT.svg
        if len(a.files) != 2 or not a.files[1].endswith(".svg"):
            raise InputError("give the output with -o OUT.svg")
        a.output = a.files.pop()
    if a.label and len(a.label) != len(a.files):
        raise InputError(f"{len(a.label)} --label for {len(a.files)} files")
    a.series = [k for k in a.series.split(",") if k]
    for k in a.series:
        if k not in KNOWN_SERIES:
            raise InputError(f"--series: unknown key '{k}' (known: {', '.join(KNOWN_SERIES)})")
    return a


def main(argv):
    try:
        a = parse_args(argv[1:])
        x_key = "step" if a.x == "step" else "train_seconds"
        scale = 1.0 if a.x == "step" else 1.0 / 60.0
        series = []
        for i, path in enumerate(a.files):
            data = read_metrics(path, x_key, a.series)
            run = a.label[i] if a.label else os.path.basename(os.path.dirname(os.path.abspath(path)))
            for key in a.series:
                xs, ys = data[key]
                if not xs:
                    continue
                name, right = KNOWN_SERIES[key]
                if len(a.files) > 1:
                    name = f"{run}: {name}"
                series.append((name, [x * scale for x in xs], ys, right))
        if not series:
            raise InputError(f"{', '.join(a.files)}: no line has \"{x_key}\" with any of {', '.join(a.series)}")
        if a.title is not None:
            title = a.title
        elif len(a.files) == 1:
            run = a.label[0] if a.label else os.path.basename(os.path.dirname(os.path.abspath(a.files[0])))
            title = f"training curves: {run}" if run else "training curves"
        else:
            title = "training curves"
        right_label = "BLEU" if any(k in ("valid_bleu", "test_bleu") for k in a.series) else "score"
        x_label = "step" if a.x == "step" else "training minutes"
        write_atomic(a.output, line_chart_svg(series, title, x_label, "loss", right_label))
    except InputError as e:
        print(f"plot_metrics: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
