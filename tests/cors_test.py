#!/usr/bin/env python3
"""`nmt serve --allow-origin` from a real page in headless Chromium.

Usage: cors_test.py NMT_BINARY CHECKPOINT TMP_DIR

Starts `nmt serve` on a free port of 127.0.0.1 with --allow-origin naming a
page served from another free port, and an API key file; then, from that
page in Chromium (a fresh profile), calls the API the way a web application
does: a JSON POST with the key (which the browser preflights with OPTIONS),
a GET, a POST without the key. The allowed page reads every answer, the
401 included, and the exposed Server-Timing header; a page on a third port,
not allowed, is blocked by the browser (its preflight gets 403). The key is
still required. Both servers are stopped at the end, whatever happens.
Prints one PASS line, or FAIL with the reason and exits 1.
"""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from browser_test import Failure, check, chromium, other_site, wait

KEY = "cors-test-key-0123456789abcdef"
SENTENCE = "\u6211\u7231\u6c34\u8bfe"  # 我爱水课

# Runs in the page (execute_async_script): one fetch, and what the page can
# read of its answer, or the error the browser gave it.
FETCH_JS = """
const [url, options, done] = arguments;
fetch(url, options).then(
  (r) => r.text().then((body) => done({status: r.status, body: body,
                                       timing: r.headers.get('Server-Timing')})),
  (e) => done({error: String(e)}));
"""


@contextlib.contextmanager
def nmt_serve(nmt, checkpoint, tmp, args):
    """`nmt serve` on a free port (--port 0, --port-file); yields its base URL; stopped after."""
    port_file = os.path.join(tmp, "cors.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    log = open(os.path.join(tmp, "cors_serve.log"), "w")
    server = subprocess.Popen([nmt, "serve", "--checkpoint", checkpoint, "--port", "0", "--port-file", port_file,
                               "--threads", "1", *args], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            check(server.poll() is None, f"nmt serve exited {server.returncode}: {open(log.name).read()[-400:]}")
            check(time.monotonic() < deadline, "nmt serve did not start in 60 s")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{open(port_file).read().strip()}/"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def fetch_in_page(driver, url, options):
    driver.set_script_timeout(60)
    return driver.execute_async_script(FETCH_JS, url, options)


def run(nmt, checkpoint, tmp):
    key_file = os.path.join(tmp, "cors_keys.txt")
    with open(key_file, "w") as f:
        f.write(KEY + "\n")
    page = "<!doctype html><title>an application</title><p>calls the translation service</p>"
    with other_site(page) as app, other_site(page) as stranger:
        app_origin = app.rstrip("/")
        with nmt_serve(nmt, checkpoint, tmp, ["--allow-origin", app_origin, "--api-key-file", key_file]) as base:
            translate = base + "v1/translate"
            post = {"method": "POST", "headers": {"Content-Type": "application/json", "Authorization": "Bearer " + KEY},
                    "body": json.dumps({"text": [SENTENCE]})}
            # What the browser asks first, as it asks it: the preflight.
            request = urllib.request.Request(translate, method="OPTIONS", headers={
                "Origin": app_origin, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type"})
            with urllib.request.urlopen(request, timeout=30) as r:
                check(r.status == 204, f"preflight answered {r.status}")
                check(r.headers.get("Access-Control-Allow-Origin") == app_origin,
                      f"preflight: Access-Control-Allow-Origin {r.headers.get('Access-Control-Allow-Origin')!r}")
                check("Origin" in (r.headers.get("Vary") or ""), f"preflight: Vary {r.headers.get('Vary')!r}")
            with chromium("cors") as driver:
                driver.get(app)
                wait(driver, 10, lambda d: d.title == "an application", "the application's page did not load")
                got = fetch_in_page(driver, translate, post)
                check("error" not in got and got["status"] == 200,
                      f"the allowed page's POST with its key: {got} (see the service's log)")
                translations = json.loads(got["body"])["translations"]
                check(len(translations) == 1 and translations[0], f"the allowed page read {got['body']!r}")
                check(got["timing"] and "translate;dur=" in got["timing"],
                      f"the page cannot read Server-Timing ({got['timing']!r}): not exposed")
                info = fetch_in_page(driver, base + "v1/info", {"headers": {"Authorization": "Bearer " + KEY}})
                check(info.get("status") == 200 and "heads" in info.get("body", ""), f"the allowed page's GET: {info}")
                # The key is still required, and the page can read why not.
                keyless = fetch_in_page(driver, translate, {**post, "headers": {"Content-Type": "application/json"}})
                check(keyless.get("status") == 401 and "Authorization" in keyless.get("body", ""),
                      f"the allowed page's POST without a key: {keyless}")
                # A page of another origin: the browser blocks it.
                driver.get(stranger)
                wait(driver, 10, lambda d: d.title == "an application", "the other page did not load")
                blocked = fetch_in_page(driver, translate, post)
                check("error" in blocked and "Failed to fetch" in blocked["error"],
                      f"a page of an origin not allowed was not blocked: {blocked}")
    return translations[0]


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    nmt, checkpoint, tmp = sys.argv[1:]
    started = time.monotonic()
    try:
        translation = run(nmt, checkpoint, tmp)
    except Failure as e:
        print(f"FAIL: cors_test: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, urllib.error.URLError) as e:
        print(f"FAIL: cors_test: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"PASS: cors_test: a page of the --allow-origin origin read the service's answers in Chromium (preflighted "
          f"POST with its key: {translation!r}; GET; 401 without the key) and Server-Timing; a page of another "
          f"origin was blocked ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
