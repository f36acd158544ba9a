#!/usr/bin/env python3
"""The README's and docs' claims about the command line, checked against the binary.

Usage: docs_test.py NMT_BINARY SOURCE_DIR

- Every `nmt SUB ... --flag` the docs show (in code spans and ```sh blocks,
  `build/nmt` or `nmt`) names a subcommand that exists and flags that
  `nmt SUB --help` lists; every choice list written `--flag a|b|c` or
  `{a,b,c}` is the binary's, in full.
- Every config key the docs name (`train.max_minutes`, ...) is one the binary
  knows (it lists them when refused an unknown one).
- The files a shown command reads (configs/..., data/...) are in the checkout.
- The tables of docs/bad_input.md that the binary can answer at once: the
  exit code of a catalog with a placeholder fault, and the line for a
  --rank that is no choice, are what nmt does.
Prints one line per failure and a summary; exits 1 if any failed.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

nmt, src = sys.argv[1:3]
# The READMEs, and every document of docs/ and docs/bench/ but the reports of
# bench/bench_gpu.sh, kept as the runs wrote them (docs/README.md lists all).
DOCS = ["README.md", "data/real/README.md", "data/README.md"] + sorted(
    os.path.relpath(path, src)
    for folder in ("docs", "docs/bench")
    for path in glob.glob(os.path.join(src, folder, "*.md"))
    if not os.path.basename(path).startswith("gpu_h100_bench_report"))
SECTIONS = ("data", "tokenizer", "model", "attention", "train", "decode")
failures, passes = [], 0


def check(ok, what):
    global passes
    if ok:
        passes += 1
    else:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(*args, **kw):
    return subprocess.run([nmt, *args], capture_output=True, text=True, timeout=120, **kw)


subcommands = re.findall(r"^  ([a-z-]+)\s", run("--help").stdout, re.M)
helps = {sub: run(sub, "--help").stdout for sub in subcommands}
flags = {sub: set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", h)) | {"--help"} for sub, h in helps.items()}
choices = {}  # (sub, flag) -> the binary's choices, from "--flag TEXT:{a,b,c}"
for sub, h in helps.items():
    for flag, listed in re.findall(r"(--[a-z0-9-]+) [A-Z]+:\{([^}]*)\}", h):
        choices[(sub, flag)] = set(listed.split(","))

known_keys = set()
for section in SECTIONS:
    err = run("train", "--config", os.path.join(src, "configs/toy.yaml"), "--set", section + ".no_such_key=1").stderr
    found = re.search(r"known in " + section + r": ([a-z_, 0-9]+)\)", err)
    check(found is not None, f"nmt names no known keys of {section}: {err.strip()[-200:]}")
    if found:
        known_keys |= {section + "." + k.strip() for k in found.group(1).split(",")}


# The demo's beam scoring (scripts/demo.sh), which the docs' figures quote.
DEMO_LENGTH_PENALTY = re.search(r"--beam 4 --length-penalty ([0-9.]+)",
                                open(os.path.join(src, "scripts/demo.sh"), encoding="utf-8").read()).group(1)


def commands(text):
    """(line, subcommand, arguments, in a sh block) of every nmt command shown:
    code spans, and the lines of ```sh blocks (without their comments, split
    at pipes and ;, &&)."""
    out = []
    block = None  # the open block's language
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            block = None if block is not None else (line[3:].strip() or "text")
            continue
        if block is not None:
            if block != "sh":
                continue
            pieces = re.split(r"\s\|\s|;|&&", re.sub(r"(^|\s)#.*", "", line))
        else:
            pieces = re.findall(r"`([^`]+)`", line)
        for piece in pieces:
            m = re.search(r"(?:^|[\s(])(?:build/)?nmt ([a-z][a-z-]+)(.*)$", piece)
            if m:
                out.append((number, m.group(1), m.group(2), block is not None))
    return out


for doc in DOCS:
    path = os.path.join(src, doc)
    text = open(path, encoding="utf-8").read()
    for number, sub, args, in_block in commands(text):
        where = f"{doc}:{number}: nmt {sub}"
        if sub not in helps:
            # "nmt serve's answers" and the like: prose, not a command.
            if in_block or re.match(r"^\s*--", args or ""):
                check(False, f"{where}: no such subcommand (nmt has: {', '.join(subcommands)})")
            continue
        for flag in re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", args):
            check(flag in flags[sub], f"{where}: {flag} is not an option of nmt {sub}")
        # Choices shown as --flag a|b|c (a table cell escapes the bar: a\|b).
        for flag, listed in re.findall(r"(--[a-z0-9-]+) \[?([a-z0-9_]+(?:\\?\|[a-z0-9_]+)+)", args):
            shown = set(re.split(r"\\?\|", listed))
            if (sub, flag) in choices:
                check(shown == choices[(sub, flag)],
                      f"{where}: {flag} shown as {sorted(shown)}, nmt takes {sorted(choices[(sub, flag)])}")
        # What a shown command writes goes outside the checkout's own files:
        # a run's folder (checkpoints/), /tmp, a build folder; a user who
        # follows the docs must not find untracked files in the checkout.
        if in_block:
            for flag, out in re.findall(r"(?<![\w-])(--output|--attention-map|--port-file) +(\S+)", args):
                check(re.match(r"(/tmp/|checkpoints/|build[\w-]*/|-$)", out) is not None,
                      f"{where}: {flag} {out} writes into the checkout (use checkpoints/ or /tmp/)")
        # A command on the demo's toy model with a beam scores as the demo
        # does: the same --length-penalty (its figures are quoted with it).
        if "checkpoints/toy" in args and re.search(r"--beam [1-9]", args):
            penalty = re.search(r"--length-penalty ([0-9.]+)", args)
            check(penalty is not None and penalty.group(1) == DEMO_LENGTH_PENALTY,
                  f"{where}: --beam on the toy model without the demo's --length-penalty {DEMO_LENGTH_PENALTY}")
        # Files a shown command reads, relative to the checkout.
        if in_block:
            for f in re.findall(r"(?<![\w/.-])((?:configs|data)/[\w./+-]+\.(?:yaml|zh|en))", args):
                check(os.path.exists(os.path.join(src, f)), f"{where}: {f} is not in the checkout")
    # (model.pt, train.zh and the like are files, not keys.)
    files = r"(?!(?:bin|pt|zh|en|json|jsonl|csv|txt|yaml|model|vocab|svg|md|safetensors)\b)"
    for key in sorted(set(re.findall(r"`((?:" + "|".join(SECTIONS) + r")\." + files + r"[a-z_]+)", text))):
        check(key in known_keys, f"{doc}: `{key}` is no config key nmt knows")

# Other programs' outputs in the docs' shell blocks (msgunfmt -o, > FILE):
# outside the checkout too.
for doc in DOCS:
    block = None
    for number, line in enumerate(open(os.path.join(src, doc), encoding="utf-8").read().splitlines(), 1):
        if line.startswith("```"):
            block = None if block is not None else (line[3:].strip() or "text")
            continue
        if block != "sh":
            continue
        for out in re.findall(r"(?:\s-o|[^2&]>)\s*([\w./-]+)", re.sub(r"(^|\s)#.*", "", line)):
            check(re.match(r"(/tmp/|/dev/|checkpoints/|build[\w-]*/)", out) is not None,
                  f"{doc}:{number}: writes {out} into the checkout (use checkpoints/ or /tmp/)")

# The toy demo's scores: the README gives what varies by CPU as a range, and
# docs/bench/toy.md records the runs; every recorded run lies in the range,
# and its ends are recorded runs (a claim no run made, or a run the claim
# leaves out, fails here).
readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
toy = open(os.path.join(src, "docs/bench/toy.md"), encoding="utf-8").read()
claim = re.search(r"test BLEU (\d+\.\d+)-(\d+\.\d+) greedy and beam 4", readme)
table = re.search(r"^\| machine \| greedy BLEU \| beam 4 BLEU \|.*\n\|[-| ]+\|\n((?:\|.*\n)+)", toy, re.M)
runs = [float(x) for row in (table.group(1).splitlines() if table else [])
        for x in [c.strip() for c in row.strip("|").split("|")][1:3]]
check(claim is not None, "README.md: no toy demo BLEU range ('test BLEU A-B greedy and beam 4')")
check(len(runs) >= 2, f"docs/bench/toy.md: no recorded runs of the demo's scoring ({runs})")
if claim and runs:
    low, high = float(claim.group(1)), float(claim.group(2))
    check(all(low <= r <= high for r in runs) and min(runs) == low and max(runs) == high,
          f"README.md: toy BLEU {low}-{high}, docs/bench/toy.md records {sorted(set(runs))}")

# docs/bad_input.md, the check-po table: what it says against what nmt does.
bad_input = open(os.path.join(src, "docs/bad_input.md"), encoding="utf-8").read()
with tempfile.TemporaryDirectory() as tmp:
    catalog = os.path.join(tmp, "faulty.po")
    with open(catalog, "w", encoding="utf-8") as f:
        f.write('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                '#, c-format\nmsgid "cannot open %s"\nmsgstr "无法打开"\n')
    row = re.search(r"^\| placeholders wrong \|.*\| (\d+) \|$", bad_input, re.M)
    rc = run("check-po", catalog).returncode
    check(row is not None and int(row.group(1)) == rc,
          f"docs/bad_input.md: check-po with a dropped %s: the table says exit {row.group(1) if row else '?'}, nmt "
          f"exits {rc}")
    row = re.search(r"^\| `--rank` not a choice \| `--rank best` \| `([^`]*)` \| (\d+) \|$", bad_input, re.M)
    r = run("check-po", catalog, "--rank", "best")
    message = r.stderr.strip().splitlines()[-1].removeprefix("nmt: error: ").removesuffix(" (see nmt --help)")
    check(row is not None and row.group(1) == message and int(row.group(2)) == r.returncode,
          f"docs/bad_input.md: --rank best: the table says {row.groups() if row else None}, nmt says {message!r}, "
          f"exit {r.returncode}")
    for exits in re.findall(r"^\| a `msgid` that is no printf format .*\| ([^|]+) \|$", bad_input, re.M):
        check(exits.strip() in ("0 or 3",), f"docs/bad_input.md: a msgid that is no printf format exits {exits!r}")

print(f"docs_test: {passes} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
