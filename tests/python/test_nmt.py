"""`import nmt` against the nmt program on one checkpoint: the same
translations, files and errors, threads that share a Translator, the GIL
released while decoding, Ctrl-C. Run by tests/python_test.sh, which trains
the checkpoint and installs the package (`pip install .`); it passes
NMT_BINARY, NMT_TEST_CHECKPOINT and NMT_TEST_LINES."""

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

import nmt

NMT = os.environ["NMT_BINARY"]
CHECKPOINT = os.environ["NMT_TEST_CHECKPOINT"]
LINES_FILE = os.environ["NMT_TEST_LINES"]


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


LINES = read_lines(LINES_FILE)


def nmt_translate(tmp_path, *flags):
    out = tmp_path / "cli.en"
    subprocess.run([NMT, "translate", "--checkpoint", CHECKPOINT, "--input", LINES_FILE, "--output", str(out), *flags],
                   check=True, stderr=subprocess.DEVNULL)
    return read_lines(out)


def cli_error(*args):
    """The one-line message `nmt` prints for a bad command (after "nmt: error: ")."""
    run = subprocess.run([NMT, *args], capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("nmt: error: ")]
    assert len(errors) == 1, run.stderr
    return errors[0][len("nmt: error: "):]


@pytest.fixture(scope="module")
def translator():
    return nmt.Translator(CHECKPOINT, device="cpu", compute_type="int8", threads=2)


def test_translates_as_the_nmt_program(tmp_path, translator):
    got = translator.translate_batch(LINES, beam_size=0)
    assert [r.hypotheses[0] for r in got] == nmt_translate(tmp_path, "--compute-type", "int8", "--beam", "0")
    beam = translator.translate_batch(LINES, beam_size=4, length_penalty=1.0, max_decoding_length=160)
    assert [r.hypotheses[0] for r in beam] == nmt_translate(
        tmp_path, "--compute-type", "int8", "--beam", "4", "--length-penalty", "1.0", "--max-len", "160")
    assert all(len(r.hypotheses) == 1 and r.source_tokens > 0 for r in got)
    assert "CPU runtime: int8" in translator.description


def test_results_of_empty_and_overlong_lines(translator):
    empty, long = translator.translate_batch(["", LINES[0] * 200], beam_size=0)
    assert empty.hypotheses == [""] and empty.source_tokens == 0 and not empty.source_cut
    assert long.source_cut and long.source_tokens > 0
    assert "hypotheses=" in repr(empty)


def test_translate_file_writes_what_translate_batch_gives(tmp_path, translator):
    out = tmp_path / "out.en"
    stats = translator.translate_file(pathlib.Path(LINES_FILE), out, beam_size=2)
    assert stats.lines == len(LINES)
    assert read_lines(out) == [r.hypotheses[0] for r in translator.translate_batch(LINES, beam_size=2)]
    # A bad line: ValueError naming the file and line, and no output file.
    bad = tmp_path / "bad.zh"
    bad.write_bytes("你好\n".encode() + b"\xff\xfe\n")
    with pytest.raises(ValueError, match=r"bad\.zh:2: not valid UTF-8"):
        translator.translate_file(bad, tmp_path / "never.en")
    assert not (tmp_path / "never.en").exists()


def test_bad_input_raises_value_error_with_the_clis_message(tmp_path):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(ValueError) as e:
        nmt.Translator(missing)
    assert str(e.value) == cli_error("translate", "--checkpoint", missing, "--input", LINES_FILE)
    with pytest.raises(ValueError, match=r"^compute_type: 'int4' is not one of: float32 \| bf16 \| int8 \| auto$"):
        nmt.Translator(CHECKPOINT, compute_type="int4")
    with pytest.raises(ValueError, match=r"^device: cuda needs the nmt program"):
        nmt.Translator(CHECKPOINT, device="cuda")
    with pytest.raises(ValueError, match=r"^attention torch needs the nmt program"):
        nmt.Translator(CHECKPOINT, attention="torch", compute_type="float32")
    t = nmt.Translator(CHECKPOINT, threads=1)
    with pytest.raises(ValueError, match=r"^beam_size: 65 is not in 0\.\.64$"):
        t.translate_batch(LINES, beam_size=65)
    with pytest.raises(ValueError, match=r"^max_length_factor: 'often' is not a number or 'auto'$"):
        t.translate_batch(LINES, max_length_factor="often")
    with pytest.raises(ValueError, match=r"^score: 2 sources but 1 targets$"):
        t.score_batch(LINES[:2], ["a"])
    with pytest.raises(TypeError):
        t.translate_batch("一句话")  # a string, not a list of lines


def test_threads_share_one_translator(translator):
    calls = [(LINES[i::4], {"beam_size": (0, 4, 2, 0)[i], "max_batch_size": (32, 5, 3, 1)[i]}) for i in range(4)]
    alone = [translator.translate_batch(lines, **opts) for lines, opts in calls]
    together = [None] * 4

    def work(i):
        together[i] = translator.translate_batch(calls[i][0], **calls[i][1])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert [r.hypotheses for r in together[i]] == [r.hypotheses for r in alone[i]], f"call {i}"


def test_decoding_releases_the_gil(translator):
    lines = LINES * 20
    done = threading.Event()
    worker = threading.Thread(target=lambda: (translator.translate_batch(lines, beam_size=4), done.set()))
    counted = 0
    start = time.monotonic()
    worker.start()
    while not done.is_set():
        counted += 1
    worker.join()
    seconds = time.monotonic() - start
    # Python ran beside the decoding the whole time (a held GIL would leave
    # this loop a few switch intervals at most).
    assert seconds > 0.2, "too little to decode to tell"
    assert counted > 100_000 * seconds, (counted, seconds)


def test_ctrl_c_stops_a_call(tmp_path):
    script = tmp_path / "long.py"
    script.write_text(
        "import sys, nmt\n"
        f"t = nmt.Translator({CHECKPOINT!r}, threads=1)\n"
        f"lines = {LINES!r} * 400\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    t.translate_batch(lines, beam_size=5)\n"
        "    print('finished')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n")
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=30)
    assert out.strip() == "interrupted"
    assert time.monotonic() - sent < 2.0


def test_scores_are_log_probabilities(translator):
    targets = [r.hypotheses[0] for r in translator.translate_batch(LINES[:5], beam_size=0)]
    scores = translator.score_batch(LINES[:5], targets)
    assert len(scores) == 5 and all(scores) and all(s <= 0 for row in scores for s in row)


def test_beside_pytorch(tmp_path):
    """PyTorch (the peers' PyPI build) and nmt in one process."""
    torch = pytest.importorskip("torch")
    t = nmt.Translator(CHECKPOINT, compute_type="int8", threads=2)
    got = [r.hypotheses[0] for r in t.translate_batch(LINES, beam_size=0)]
    assert torch.ones(2).sum().item() == 2.0
    assert got == nmt_translate(tmp_path, "--compute-type", "int8", "--beam", "0")
