#!/usr/bin/env python3
"""Headless-Chromium test of the attention explorer page that `nmt serve` serves at /.

Usage:
  browser_test.py --url http://127.0.0.1:PORT/ --screenshot out.png --sentence "中文句子"

Needs selenium (Debian: python3-selenium), chromium and chromium-driver
(/usr/bin/chromedriver). The page is checked against the server's own
answers: the same sentence's attention maps are fetched from POST
v1/translate directly, and every heatmap cell shown is compared with them.
Prints one PASS line, or FAIL with the reason and exits 1.
"""
import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

KINDS = ("encoder_self", "decoder_self", "cross")
TOLERANCE = 1e-3
PHONE = (390, 844)
MIN_PHONE_CELL = 24  # px: a finger's target


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def api(base, path, body=None):
    """(status, json) of a request to the server, errors included."""
    url = urllib.parse.urljoin(base, path)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def start_chromium(profile, phone=False):
    options = webdriver.ChromeOptions()
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--window-size=1280,900", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    if phone:  # a 390x844 phone with a touch screen
        options.add_experimental_option("mobileEmulation", {
            "deviceMetrics": {"width": PHONE[0], "height": PHONE[1], "pixelRatio": 3, "touch": True},
            "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
                         "Chrome/120.0 Mobile Safari/537.36"})
    if os.path.exists("/usr/bin/chromium"):
        options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: selenium-manager must not try to download one.
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    if phone:
        return driver
    # --window-size is the outer size; make the page's viewport 1280x900.
    extra_w, extra_h = driver.execute_script(
        "return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight];")
    if extra_w or extra_h:
        driver.set_window_size(1280 + extra_w, 900 + extra_h)
    return driver


def expected_matrix(att, kind, layer, head):
    per_head = att[kind][layer]
    if head != "mean":
        return per_head[int(head)]
    rows, cols = len(per_head[0]), len(per_head[0][0]) if per_head[0] else 0
    return [[sum(h[r][c] for h in per_head) / len(per_head) for c in range(cols)] for r in range(rows)]


# The heatmap is one canvas: each cell's colour, sampled a quarter of the way
# into the cell (clear of its number and rounded corners), as [r, c, [R, G, B]].
CELLS_JS = """
const cv = document.querySelector('#heatmap canvas.cells');
if (!cv) return null;
const rows = Number(cv.dataset.rows), cols = Number(cv.dataset.cols);
const w = parseFloat(cv.style.width), h = parseFloat(cv.style.height);
const pitchX = (w + 1) / cols, pitchY = (h + 1) / rows, sx = cv.width / w, sy = cv.height / h;
const data = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
const out = [];
for (let r = 0; r < rows; ++r)
  for (let c = 0; c < cols; ++c) {
    const x = Math.floor((c * pitchX + (pitchX - 1) * 0.25) * sx), y = Math.floor((r * pitchY + (pitchY - 1) * 0.25) * sy);
    const o = (y * cv.width + x) * 4;
    out.push([r, c, [data[o], data[o + 1], data[o + 2]]]);
  }
return {rows: rows, cols: cols, scale: document.getElementById('scale').value, cells: out};
"""

LOOK_JS = """
const cv = document.querySelector('#heatmap canvas.cells');
const rows = Number(cv.dataset.rows), cols = Number(cv.dataset.cols);
const map = document.getElementById('heatmap').getBoundingClientRect();
const area = document.getElementById('heatmap').parentElement;
return {w: (parseFloat(cv.style.width) + 1) / cols - 1, h: (parseFloat(cv.style.height) + 1) / rows - 1,
        right: map.right, vw: window.innerWidth,
        scroll_w: area.scrollWidth, client_w: area.clientWidth,
        rlabels: document.querySelectorAll('#heatmap .rlabel').length,
        clabels: document.querySelectorAll('#heatmap .clabel').length,
        elements: document.querySelectorAll('#heatmap *').length};
"""

# The page's colour ramp (YlGnBu, 256 steps), to read values back from colours.
STOPS = [(255, 255, 217), (237, 248, 177), (199, 233, 180), (127, 205, 187), (65, 182, 196), (29, 145, 192),
         (34, 94, 168), (37, 52, 148), (8, 29, 88)]


def ramp(i):
    x = i / 255 * (len(STOPS) - 1)
    k = min(int(x), len(STOPS) - 2)
    f = x - k
    return tuple(round(a + (b - a) * f) for a, b in zip(STOPS[k], STOPS[k + 1]))


RAMP = [ramp(i) for i in range(256)]


def near(rgb, ramp_colour):
    """Whether rgb is ramp_colour, within 2 in each channel (the canvas's rounding)."""
    return max(abs(a - b) for a, b in zip(rgb, ramp_colour)) <= 2


def colour_matches(rgb, value, scale, steps=3):
    """Whether rgb is the ramp's colour for value, within a few of its 256 steps."""
    x = min(max(value, 0.0), 1.0)
    i = round((x ** 0.5 if scale == "sqrt" else x) * 255)
    return any(near(rgb, RAMP[j]) for j in range(max(0, i - steps), min(255, i + steps) + 1))


def on_ramp(rgb):
    return any(near(rgb, c) for c in RAMP)


def walk_readout(driver, rows, cols):
    """Every cell's value as the readout gives it, walking the map with the arrow keys."""
    heatmap = driver.find_element(By.ID, "heatmap")
    driver.execute_script("arguments[0].focus();", heatmap)  # focus shows cell (0, 0)
    values = {}
    for r in range(rows):
        for c in range(cols):
            text = text_of(driver, "readout")
            found = re.search(r"(\d+\.\d{4})\s+·\s+row (\d+), column (\d+)", text)
            if "masked, a future position" in text:
                values[(r, c)] = None
            else:
                check(found and (int(found.group(2)), int(found.group(3))) == (r + 1, c + 1),
                      f"readout {text!r} is not cell ({r}, {c})")
                values[(r, c)] = float(found.group(1))
            if c + 1 < cols:
                heatmap.send_keys(Keys.ARROW_RIGHT)
        if r + 1 < rows:
            heatmap.send_keys(Keys.ARROW_DOWN, Keys.HOME)
    driver.execute_script("arguments[0].blur();", heatmap)
    return values


def wait(driver, seconds, condition, message):
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.05).until(lambda d: condition(d))
    except TimeoutException:
        raise Failure(message) from None


def text_of(driver, element_id):
    return driver.execute_script(f"return document.getElementById('{element_id}').textContent.trim();")


def translation_of(driver):
    """The translations the page shows, without the notes beside them."""
    return driver.execute_script("return Array.from(document.querySelectorAll('#translation .tr-text'),"
                                 " e => e.textContent.trim()).join('\\n');")


def notes_of(driver):
    return driver.execute_script("return Array.from(document.querySelectorAll('#translation .tr-note'),"
                                 " e => e.textContent.trim());")


def error_shown(driver):
    return driver.execute_script("const e = document.getElementById('error');"
                                 "return e.hidden || e.offsetParent === null ? '' : e.textContent.trim();")


def translate_in_page(driver, text):
    source = driver.find_element(By.ID, "source")
    source.clear()
    driver.execute_script("arguments[0].value = arguments[1];"
                          "arguments[0].dispatchEvent(new Event('input'));", source, text)
    driver.find_element(By.ID, "translate").click()


def select(driver, element_id, value):
    Select(driver.find_element(By.ID, element_id)).select_by_value(value)


def option_values(driver, element_id):
    return driver.execute_script(
        f"return Array.from(document.getElementById('{element_id}').options, o => o.value);")


def severe_console(driver, allowed=()):
    """The browser's SEVERE console messages, each once, except the allowed ones."""
    messages = [e["message"] for e in driver.get_log("browser")
                if e.get("level") == "SEVERE" and not any(a in e["message"] for a in allowed)]
    return list(dict.fromkeys(messages))


@contextlib.contextmanager
def chromium(label, phone=False):
    """A Chromium session with a fresh profile, removed afterwards; its errors as Failure naming label."""
    profile = tempfile.mkdtemp(prefix="nmt-browser-test-")
    driver = None
    try:
        driver = start_chromium(profile, phone=phone)
        driver.set_page_load_timeout(20)
        yield driver
    except WebDriverException as e:
        raise Failure(f"{label}: {e.msg or e}") from None
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def run(args):
    base = args.url if args.url.endswith("/") else args.url + "/"
    status, info = api(base, "v1/info")
    check(status == 200, f"GET v1/info answered {status}")
    status, answer = api(base, "v1/translate", {"text": [args.sentence], "beam": 1, "attention": True})
    check(status == 200, f"POST v1/translate answered {status}: {answer}")
    att = answer["attention"][0]
    S, T = len(att["source"]), len(att["target_in"])
    shape = {"encoder_self": (S, S), "decoder_self": (T, T), "cross": (T, S)}

    checked_cells = 0
    with chromium("browser") as driver:
        driver.get(base)
        model_text = wait(driver, 10, lambda d: text_of(d, "model-info") or False,
                          "#model-info stayed empty (GET v1/info from the page failed?)")
        check(str(info["heads"]) in model_text and str(info["model"]) in model_text,
              f"#model-info {model_text!r} does not show the heads ({info['heads']}) and model ({info['model']})")
        check(not error_shown(driver), f"#error shown on load: {error_shown(driver)!r}")
        # The examples are the model's own (v1/info: its validation sources).
        chips = driver.execute_script("return Array.from(document.querySelectorAll('#examples .example'),"
                                      " e => e.textContent);")
        check(chips and chips == info.get("examples"),
              f"the example chips {chips} are not the model's examples {info.get('examples')}")

        # Bad input: empty source -> a message (or a disabled button), no crash.
        translate_in_page(driver, "   ")
        button = driver.find_element(By.ID, "translate")
        time.sleep(0.2)
        check(error_shown(driver) or not button.is_enabled(),
              "empty source: no message in #error and the Translate button stayed enabled")

        # A request the server refuses: its message must reach #error.
        lines = ["好"] * 65
        status, refused = api(base, "v1/translate", {"text": lines, "beam": 1, "attention": True})
        refused_checked = False
        if status >= 400:
            translate_in_page(driver, "\n".join(lines))
            wait(driver, 15, lambda d: error_shown(d) and not d.find_element(By.ID, "translate")
                 .get_attribute("disabled"), f"a {status} answer was not shown in #error")
            message = refused["error"]["message"]
            check(message in error_shown(driver), f"#error {error_shown(driver)!r} lacks the server's {message!r}")
            refused_checked = True
        # Only the refused request may have logged a console error.
        errors = severe_console(driver, allowed=("v1/translate - Failed to load resource",))
        check(not errors, f"console errors: {errors}")

        # The sentence, typed and sent with Ctrl+Enter... and the button.
        source = driver.find_element(By.ID, "source")
        source.clear()
        source.send_keys(args.sentence)
        driver.find_element(By.ID, "translate").click()
        translation = wait(driver, 30, lambda d: translation_of(d) or False, "#translation stayed empty")
        check(translation == answer["translations"][0],
              f"#translation {translation!r} differs from the API's {answer['translations'][0]!r}")
        check(not error_shown(driver), f"#error shown after a good translation: {error_shown(driver)!r}")
        requests_before = driver.execute_script(
            "return performance.getEntriesByType('resource').filter(e => e.name.includes('v1/translate')).length;")

        for kind in KINDS:
            select(driver, "kind", kind)
            layers, heads = len(att[kind]), len(att[kind][0])
            check(option_values(driver, "layer") == [str(i) for i in range(layers)],
                  f"{kind}: #layer options {option_values(driver, 'layer')} are not 0..{layers - 1}")
            check(option_values(driver, "head") == ["mean"] + [str(h) for h in range(heads)],
                  f"{kind}: #head options {option_values(driver, 'head')} are not mean, 0..{heads - 1}")
            for layer in sorted({0, layers - 1}):
                for head in ("mean", "0", str(heads - 1)):
                    select(driver, "layer", str(layer))
                    select(driver, "head", head)
                    what = f"{kind} layer {layer} head {head}"
                    rows, cols = shape[kind]
                    drawn = driver.execute_script(CELLS_JS)
                    check(drawn is not None, f"{what}: no canvas in #heatmap")
                    check((drawn["rows"], drawn["cols"]) == (rows, cols),
                          f"{what}: a {drawn['rows']}x{drawn['cols']} map, expected {rows}x{cols}")
                    cells = drawn["cells"]
                    want = expected_matrix(att, kind, layer, head)
                    for r, c, rgb in cells:
                        if kind == "decoder_self" and c > r:
                            check(not on_ramp(rgb), f"{what}: future cell ({r},{c}) is coloured {rgb}, not hatched")
                        else:
                            check(colour_matches(rgb, want[r][c], drawn["scale"]),
                                  f"{what}: cell ({r},{c}) is coloured {rgb}, not the colour of the API's "
                                  f"{want[r][c]:.4f}")
                    checked_cells += len(cells)
            # Exact values: every cell of the last view through the readout.
            rows, cols = shape[kind]
            read = walk_readout(driver, rows, cols)
            want = expected_matrix(att, kind, sorted({0, layers - 1})[-1], str(heads - 1))
            for (r, c), value in read.items():
                if kind == "decoder_self" and c > r:
                    check(value is None, f"{kind}: the readout gives future cell ({r},{c}) a value")
                else:
                    check(value is not None and abs(value - want[r][c]) <= TOLERANCE,
                          f"{kind}: the readout gives cell ({r},{c}) {value}, the API {want[r][c]:.4f}")
            look = driver.execute_script(LOOK_JS)
            check(look["rlabels"] == shape[kind][0] and look["clabels"] == shape[kind][1],
                  f"{kind}: {look['rlabels']} row / {look['clabels']} column labels for a {shape[kind]} map")
            check(look["elements"] <= 4 * (rows + cols) + 10,
                  f"{kind}: {look['elements']} elements in the map for {rows}x{cols} cells (the cells are one canvas)")
            check(0.8 <= look["w"] / look["h"] <= 1.25, f"{kind}: cells {look['w']}x{look['h']} px are not square")
            check(look["right"] <= look["vw"], f"{kind}: the map ({look['right']} px) overflows the window")
            if shape[kind][1] <= 40:
                check(look["scroll_w"] <= look["client_w"],
                      f"{kind}: {shape[kind][1]} columns scroll sideways ({look['scroll_w']} > {look['client_w']} px)")

        requests_after = driver.execute_script(
            "return performance.getEntriesByType('resource').filter(e => e.name.includes('v1/translate')).length;")
        check(requests_after == requests_before,
              f"switching kind/layer/head sent {requests_after - requests_before} more translate requests")

        # The screenshot: cross attention, last layer, mean of heads, hovering a cell.
        select(driver, "kind", "cross")
        select(driver, "layer", str(len(att["cross"]) - 1))
        select(driver, "head", "mean")
        shown = expected_matrix(att, "cross", len(att["cross"]) - 1, "mean")  # what this view draws
        # The keyboard reads the map too: focus it, move one right and one down.
        if S > 1 and T > 1:
            heatmap = driver.find_element(By.ID, "heatmap")
            driver.execute_script("arguments[0].focus();", heatmap)
            heatmap.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_DOWN)
            readout = text_of(driver, "readout")
            value = f"{shown[1][1]:.4f}"
            check("row 2, column 2" in readout and value in readout,
                  f"arrow keys on the map: readout {readout!r} does not show cell (1,1) = {value}")
            driver.execute_script("arguments[0].blur();", heatmap)
        r, c = min(2, T - 1), min(1, S - 1)
        hover_cell(driver, r, c)
        tip = wait(driver, 3, lambda d: d.execute_script(
            "const t = document.getElementById('tooltip'); return !t.hidden && t.textContent;"),
            "hovering a cell shows no tooltip")
        value = f"{shown[r][c]:.4f}"
        check("→" in tip and value in tip, f"tooltip {tip!r} lacks 'query → key' and the value {value}")
        highlighted = driver.execute_script("return document.querySelectorAll('#heatmap .hl').length;")
        check(highlighted >= 2, "hovering a cell highlights no row/column labels")
        look = driver.execute_script(LOOK_JS)
        if S <= 40:
            check(look["scroll_w"] <= look["client_w"], "hovering a cell made the map scroll sideways")
        driver.save_screenshot(args.screenshot)

        errors = severe_console(driver)
        check(not errors, f"console errors: {errors}")

        # After an error the previous result goes: it is not this input's.
        if refused_checked:
            translate_in_page(driver, "\n".join(lines))
            wait(driver, 15, lambda d: error_shown(d) and not d.find_element(By.ID, "translate")
                 .get_attribute("disabled"), "the refused request's error was not shown")
            stale = driver.execute_script("return [document.getElementById('translation').textContent.trim(),"
                                          " document.querySelectorAll('#heatmap canvas').length];")
            check(stale == ["", 0], f"after an error the previous result stays: {stale}")

        # Another site's page cannot use the service: its POSTs are refused
        # (403 by Origin), here from a page on another port of 127.0.0.1.
        refused_before = forbidden_count(base)
        page = ("<script>fetch(%s, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, "
                "body: JSON.stringify({text: ['\u6253\u5f00\u6587\u4ef6']})})"
                ".then(() => document.title = 'sent', () => document.title = 'failed');</script>"
                % json.dumps(urllib.parse.urljoin(base, "v1/translate")))
        with other_site(page) as other:
            driver.get(other)
            wait(driver, 10, lambda d: d.title in ("sent", "failed"), "the other site's page never sent its POST")
        refused_after = wait(driver, 5, lambda d: forbidden_count(base) > refused_before or False,
                             "the other site's POST was not refused with 403")
        cross_origin = refused_after - refused_before
        driver.get(base)
        wait(driver, 10, lambda d: text_of(d, "model-info") or False, "the page did not load again")
        translate_in_page(driver, args.sentence)
        again = wait(driver, 30, lambda d: translation_of(d) or False, "#translation stayed empty")
        check(again == answer["translations"][0], "the page's own translation failed after the other site's POST")
        placeholders = check_placeholders_shown(driver, base) if args.protected else None
    phone_cell = run_phone(base, args, S, T)
    return S, T, checked_cells, refused_checked, cross_origin, phone_cell, placeholders


PRIVATE_USE = re.compile("[\ue000-\uf8ff]")  # the sentinels' range: drawn as boxes


def check_placeholders_shown(driver, base):
    """A placeholder-protected model reads sentinels (private-use characters) for
    placeholders; the API's tokens, the map's labels, its tooltip and readout
    show the placeholder each stands for instead. Returns the tokens checked."""
    status, info = api(base, "v1/info")
    check(info.get("protect_placeholders") is True, f"v1/info does not say the model protects placeholders: {info}")
    sentence = "\u65e0\u6cd5\u521b\u5efa\u76ee\u5f55 %s"  # 无法创建目录 %s
    status, answer = api(base, "v1/translate", {"text": [sentence], "attention": True})
    check(status == 200, f"POST v1/translate answered {status}: {answer}")
    att = answer["attention"][0]
    tokens = att["source"] + att["target_in"] + att["target_out"]
    raw = [t for t in tokens if PRIVATE_USE.search(t)]
    check(not raw, f"the API's attention tokens carry sentinels: {[ascii(t) for t in raw]}")
    # The constraint makes the translation carry the source's placeholder.
    check(any("%s" in t for t in att["source"]) and any("%s" in t for t in att["target_out"]),
          f"%s is not among the tokens: source {att['source']}, target {att['target_out']}")
    translate_in_page(driver, sentence)
    wait(driver, 30, lambda d: translation_of(d) == answer["translations"][0] or False,
         f"#translation never showed {answer['translations'][0]!r}")
    select(driver, "kind", "cross")
    labels = driver.execute_script(
        "return Array.from(document.querySelectorAll('#heatmap .rlabel, #heatmap .clabel'), e => e.textContent);")
    check(not any(PRIVATE_USE.search(t) for t in labels), f"the map's labels show sentinels: {[ascii(t) for t in labels]}")
    check(any("%s" in t for t in labels), f"no label shows %s: {labels}")
    # The row that predicts the placeholder: its tooltip and readout name it.
    row = next(r for r, t in enumerate(att["target_out"]) if "%s" in t)
    hover_cell(driver, row, 0)
    tip = wait(driver, 3, lambda d: d.execute_script(
        "const t = document.getElementById('tooltip'); return !t.hidden && t.textContent;"),
        "hovering the placeholder's row shows no tooltip")
    readout = text_of(driver, "readout")
    for what, text in (("tooltip", tip), ("readout", readout)):
        check(not PRIVATE_USE.search(text), f"the {what} shows a sentinel: {ascii(text)}")
        check("predicting \u201c" in text and "%s" in text, f"the {what} does not say it predicts %s: {text!r}")
    return len(tokens)


def check_length_limit_shown(base, sentence):
    """A service whose length limit cuts every translation short (--max-len 2):
    the page says so beside the translation, as the API's length_limited does."""
    status, answer = api(base, "v1/translate", {"text": [sentence], "attention": True})
    check(status == 200 and answer.get("length_limited") == [0], f"--max-len 2: the API answered {status}: {answer}")
    with chromium("browser (length limit)") as driver:
        driver.get(base)
        wait(driver, 10, lambda d: text_of(d, "model-info") or False, "#model-info stayed empty")
        translate_in_page(driver, sentence)
        wait(driver, 30, lambda d: translation_of(d) or False, "#translation stayed empty")
        notes = notes_of(driver)
        check(any("length limit" in n for n in notes), f"no note of the length limit beside the translation: {notes}")
        check(translation_of(driver) == answer["translations"][0],
              f"the page shows {translation_of(driver)!r}, the API {answer['translations'][0]!r}")
    return notes


def run_phone(base, args, S, T):
    """The page on a 390x844 touch screen: no keyboard hint, cells a finger can
    hit (the map pans), a tap shows the weight. Returns the cell size."""
    with chromium("browser (phone)", phone=True) as driver:
        driver.get(base)
        wait(driver, 10, lambda d: text_of(d, "model-info") or False, "phone: #model-info stayed empty")
        width = driver.execute_script("return window.innerWidth;")
        check(width == PHONE[0], f"phone: the viewport is {width} px wide, not {PHONE[0]}")
        check(driver.execute_script("return matchMedia('(hover: none) and (pointer: coarse)').matches;"),
              "phone: the emulated screen is not a touch screen")
        hint = driver.execute_script("const h = document.querySelector('.kbd-hint');"
                                     "return h && h.offsetParent !== null;")
        check(not hint, "phone: the Ctrl+Enter hint shows on a touch screen")
        overflow = driver.execute_script("return document.documentElement.scrollWidth;")
        check(overflow <= PHONE[0], f"phone: the page is {overflow} px wide, wider than the screen")
        # A sentence three times as long: too many columns to fit 390 px at a
        # finger's size, so the map must pan rather than shrink.
        translate_in_page(driver, "，".join([args.sentence] * 3))
        wait(driver, 30, lambda d: translation_of(d) or False, "phone: #translation stayed empty")
        select(driver, "kind", "cross")
        look = driver.execute_script(LOOK_JS)
        check(look["w"] >= MIN_PHONE_CELL and 0.8 <= look["w"] / look["h"] <= 1.25,
              f"phone: cells are {look['w']:.1f}x{look['h']:.1f} px (want square, at least {MIN_PHONE_CELL} px)")
        numbers = driver.execute_script("return document.getElementById('heatmap').classList.contains('numbers');")
        check(not numbers or look["w"] >= 26, f"phone: numbers drawn in {look['w']:.1f} px cells")
        r, c = min(1, T - 1), min(1, S - 1)
        hover_cell(driver, r, c, tap=True)
        tip = wait(driver, 3, lambda d: d.execute_script(
            "const t = document.getElementById('tooltip'); return !t.hidden && t.textContent;"),
            "phone: tapping a cell shows no tooltip")
        active = driver.execute_script("return document.getElementById('heatmap').dataset.active;")
        check(active == f"{r},{c}" and ("→" in tip), f"phone: tapping cell ({r},{c}) showed {active!r}: {tip!r}")
        driver.save_screenshot(args.phone_screenshot)
        errors = severe_console(driver)
        check(not errors, f"phone: console errors: {errors}")
        return look["w"]


def hover_cell(driver, r, c, tap=False):
    """Moves the pointer onto cell (r, c) of the canvas (scrolled into view), or taps it."""
    cv = driver.find_element(By.CSS_SELECTOR, "#heatmap canvas.cells")
    x, y = driver.execute_script(
        "const cv = arguments[0], r = arguments[1], c = arguments[2];"
        "const pitch = (parseFloat(cv.style.width) + 1) / Number(cv.dataset.cols);"
        "const area = cv.closest('.map-area');"
        "area.scrollLeft = Math.max(0, c * pitch - area.clientWidth / 2);"
        "area.scrollTop = Math.max(0, r * pitch - area.clientHeight / 2);"
        # The cell, not the canvas, in the middle of the window: a map taller
        # than the window (a long translation) would leave row r above it.
        "const before = cv.getBoundingClientRect();"
        "window.scrollBy(0, before.top + r * pitch + pitch / 2 - window.innerHeight / 2);"
        "const box = cv.getBoundingClientRect();"
        "return [box.left + c * pitch + pitch / 2, box.top + r * pitch + pitch / 2];", cv, r, c)
    actions = ActionBuilder(driver)
    actions.pointer_action.move_to_location(int(x), int(y))
    if tap:
        actions.pointer_action.click()
    actions.perform()


def forbidden_count(base):
    """The service's count of 403 answers to POST v1/translate (its /metrics)."""
    with urllib.request.urlopen(urllib.parse.urljoin(base, "metrics"), timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('nmt_http_requests_total{path="/v1/translate",code="403"}'):
                return int(float(line.split()[-1]))
    return 0


class other_site:
    """A page served from another origin (another port of 127.0.0.1)."""

    def __init__(self, html):
        import http.server
        import threading
        body = html.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the explorer page, e.g. http://127.0.0.1:8080/")
    parser.add_argument("--screenshot", required=True, help="PNG to write (cross attention of the sentence)")
    parser.add_argument("--phone-screenshot", help="PNG of the page on a 390x844 phone (default: beside --screenshot)")
    parser.add_argument("--sentence", default="无法打开文件", help="the Chinese sentence to translate")
    parser.add_argument("--limited-url", help="the explorer of a service started with --max-len 2: check that the page "
                        "marks a translation stopped at the length limit")
    parser.add_argument("--protected", action="store_true",
                        help="the model protects placeholders: check that its sentinels are shown as placeholders")
    args = parser.parse_args()
    if not args.phone_screenshot:
        args.phone_screenshot = os.path.splitext(args.screenshot)[0] + "-phone.png"
    started = time.monotonic()
    try:
        S, T, cells, refused, cross_origin, phone_cell, placeholders = run(args)
        limited_notes = check_length_limit_shown(args.limited_url, args.sentence) if args.limited_url else None
    except Failure as e:
        print(f"FAIL: browser_test: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError) as e:
        print(f"FAIL: browser_test: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"PASS: browser_test: {S} source x {T} target tokens, 3 kinds x layers x heads, {cells} cells "
          f"coloured as the API's weights, every cell of a view per kind read back exactly; masked future, tooltip, empty input{', server error' if refused else ''} shown, "
          f"no console errors; another site's POST refused ({cross_origin} x 403) and the page still works; "
          f"on a {PHONE[0]}x{PHONE[1]} phone {phone_cell:.0f} px cells, a tap shows the weight; "
          + (f"{placeholders} tokens of a protected model's map shown with %s, not sentinels; " if placeholders else "")
          + (f"a translation at the length limit marked ({limited_notes[0]!r}); " if limited_notes else "")
          + f"screenshots "
          f"{args.screenshot}, {args.phone_screenshot} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
