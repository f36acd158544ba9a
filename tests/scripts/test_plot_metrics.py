#!/usr/bin/python3
"""Tests of scripts/plot_metrics.py, the one owner of the training-curve chart.

Run: /usr/bin/python3 -m unittest discover -s tests/scripts (ctest does).
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "plot_metrics.py")
SVG = "{http://www.w3.org/2000/svg}"


def training_lines():
    """Train lines every 100 steps, validation lines every 2000, as nmt writes them."""
    lines = []
    for step in range(0, 20001, 100):
        lines.append({"step": step, "epoch": 1, "train_loss": 6.0 * math.exp(-step / 4000) + 1.5,
                      "train_nll": 6.0 * math.exp(-step / 4000) + 0.5, "lr": 7e-4, "train_seconds": step * 0.05})
        if step and step % 2000 == 0:
            lines.append({"step": step, "valid_loss": 5.5 * math.exp(-step / 4000) + 1.8,
                          "valid_bleu": 35 * (1 - math.exp(-step / 5000)), "train_seconds": step * 0.05})
    return lines


class PlotMetrics(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, records=None, text=None):
        path = os.path.join(self.dir.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text is not None else "".join(json.dumps(r) + "\n" for r in records))
        return path

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)

    def plot(self, *args):
        out = os.path.join(self.dir.name, "out.svg")
        r = self.run_script(*args, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, encoding="utf-8") as f:
            text = f.read()
        return text, ET.fromstring(text.encode("utf-8"))  # raises on a malformed document

    def test_two_axes_legend_and_one_polyline_per_series(self):
        path = self.write("zh-en <run>/metrics.jsonl", training_lines())
        text, root = self.plot(path)
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 4)
        self.assertEqual(len(root.findall(f".//{SVG}g[@class='series']")), 4)
        self.assertIn(">valid BLEU (right axis)</text>", text)
        # The plain cross-entropy is "train loss", beside "valid loss"; the
        # label-smoothed objective is named as such.
        self.assertIn(">train loss</text>", text)
        self.assertIn(">train loss, label-smoothed</text>", text)
        self.assertIn(">valid loss</text>", text)
        self.assertIn("rotate(-90)\" text-anchor=\"middle\">loss</text>", text)
        self.assertIn("rotate(90)\" text-anchor=\"middle\">BLEU</text>", text)
        self.assertIn("zh-en &lt;run&gt;", text)  # the run folder names the chart, escaped
        for tick in (">0</text>", ">10k</text>", ">20k</text>", ">35</text>"):
            self.assertIn(tick, text)
        self.assertNotIn("nan", text)
        self.assertNotIn("inf", text)

    def test_single_point_shows_a_marker(self):
        path = self.write("one/metrics.jsonl", [{"step": 500, "valid_bleu": 12.5}])
        text, root = self.plot(path, "--series", "valid_bleu")
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 1)
        self.assertEqual(len(root.findall(f".//{SVG}circle")), 2)  # one in the plot, one in the legend
        self.assertNotIn("(right axis)", text)  # nothing on the left to tell it apart from

    def test_null_breaks_the_line(self):
        values = [2.0, 1.5, None, 1.2, None]
        path = self.write("nf/metrics.jsonl",
                          [{"step": i + 1, "train_loss": v} for i, v in enumerate(values)])
        text, root = self.plot(path, "--series", "train_loss")
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 2)
        self.assertNotIn("nan", text)

    def test_huge_series_is_thinned_to_pixel_columns(self):
        path = self.write("big/metrics.jsonl",
                          [{"step": i, "train_loss": math.sin(i * 0.01) + 0.001 * (i % 7)}
                           for i in range(200000)])
        text, root = self.plot(path, "--series", "train_loss")
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 1)
        self.assertLess(len(text), 100000)

    def test_runs_compare_by_training_minutes(self):
        a = self.write("a/metrics.jsonl", training_lines())
        b = self.write("b/metrics.jsonl", [dict(r, train_seconds=r["train_seconds"] * 2)
                                           for r in training_lines()])
        text, root = self.plot(a, b, "--label", "nmt", "--label", "pytorch", "--x", "minutes",
                               "--series", "valid_bleu")
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 2)
        self.assertIn(">nmt: valid BLEU</text>", text)
        self.assertIn(">pytorch: valid BLEU</text>", text)
        self.assertIn(">training minutes</text>", text)
        self.assertIn(">30</text>", text)  # b's last point: 20000 * 0.1 s = 33 min

    def test_old_two_argument_form(self):
        path = self.write("r/metrics.jsonl", training_lines())
        out = os.path.join(self.dir.name, "old.svg")
        r = self.run_script(path, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        ET.parse(out)

    def test_a_line_still_being_written_is_left_out(self):
        # A running trainer appends a line at a time; the plot is read meanwhile.
        done = "".join(json.dumps({"step": s, "train_loss": 3.0 - s / 10}) + "\n" for s in (1, 2, 3))
        path = self.write("live/metrics.jsonl", text=done + '{"step": 4, "train_lo')
        text, root = self.plot(path, "--series", "train_loss")
        line, = root.findall(f".//{SVG}polyline")
        self.assertEqual(len(line.get("points").split()), 3)

    def test_bad_input_is_one_line_and_exit_2(self):
        bad = self.write("bad.jsonl", text='{"step": 1, "train_loss": 2.0}\n{"step": 2, "train_loss": \n')
        r = self.run_script(bad, "-o", os.path.join(self.dir.name, "x.svg"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("bad.jsonl:2:", r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir.name, "x.svg")))
        for args in ([os.path.join(self.dir.name, "none.jsonl"), "-o", "x.svg"],
                     [bad, "-o", "x.svg", "--series", "nope"],
                     [bad, bad, "-o", "x.svg", "--label", "only-one"]):
            r = self.run_script(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        wrong = self.write("wrong.jsonl", [{"step": 1, "train_loss": "high"}])
        r = self.run_script(wrong, "-o", os.path.join(self.dir.name, "x.svg"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("wrong.jsonl:1: \"train_loss\" is not a number", r.stderr)


if __name__ == "__main__":
    unittest.main()
