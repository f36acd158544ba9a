#!/usr/bin/env bash
# `nmt serve` end to end on a tiny model trained here (2 layers each side):
#   serve_test.sh NMT SRC            the HTTP API (tests/serve_api_test.py)
#   serve_test.sh NMT SRC --connections
#                                    idle and slow clients holding connections
#                                    (tests/serve_connections_test.py)
#   serve_test.sh NMT SRC --browser  the explorer in headless Chromium
#                                    (tests/browser_test.py), on a model that
#                                    protects placeholders, then another
#                                    origin's page calling the API
#                                    (tests/cors_test.py); exits 77
#                                    (skipped) without chromium, its driver
#                                    or python3-selenium
set -u
nmt=$1
src=$2
mode=${3:-}
. "$(dirname "$0")/lib.sh"

if [ "$mode" = --browser ]; then
  command -v chromedriver >/dev/null && command -v chromium >/dev/null &&
    /usr/bin/python3 -c 'import selenium' 2>/dev/null ||
    { echo "SKIP: needs chromium, chromium-driver and python3-selenium"; exit 77; }
fi

make_temp_dir
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
# The explorer shows a protected model's sentinels as the placeholders they stand for.
protect=()
[ "$mode" = --browser ] && protect=(--set tokenizer.protect_placeholders=true)
"$nmt" train --config "$tmp/tiny.yaml" --set train.checkpoint_dir="$tmp/run" --set model.encoder_layers=2 \
  --set model.decoder_layers=2 --set train.max_steps=400 "${protect[@]}" >"$tmp/train.log" 2>&1 ||
  { echo "FAIL: train: $(tail -2 "$tmp/train.log")"; exit 1; }

if [ "$mode" = --browser ]; then
  "$nmt" serve --checkpoint "$tmp/run" --port 0 --port-file "$tmp/port" --threads 2 >"$tmp/serve.log" 2>&1 &
  server=$!
  # A second service whose length limit stops every translation (--max-len 2).
  "$nmt" serve --checkpoint "$tmp/run" --port 0 --port-file "$tmp/limited_port" --threads 1 --max-len 2 \
    >"$tmp/limited.log" 2>&1 &
  limited=$!
  on_exit() { kill -TERM "$server" "$limited" 2>/dev/null; wait "$server" "$limited" 2>/dev/null; }
  wait_until 60 test -s "$tmp/port" || { echo "FAIL: serve did not start: $(tail -3 "$tmp/serve.log")"; exit 1; }
  wait_until 60 test -s "$tmp/limited_port" || { echo "FAIL: serve --max-len 2 did not start: $(tail -3 "$tmp/limited.log")"; exit 1; }
  shot=${NMT_SCREENSHOT:-$tmp/explorer.png}
  # The phone-size page's screenshot is kept (where ctest runs, or NMT_TEST_ARTIFACTS).
  phone_shot=${NMT_TEST_ARTIFACTS:-$PWD}/explorer-phone.png
  /usr/bin/python3 "$src/tests/browser_test.py" --url "http://127.0.0.1:$(cat "$tmp/port")/" --screenshot "$shot" \
    --phone-screenshot "$phone_shot" --protected --limited-url "http://127.0.0.1:$(cat "$tmp/limited_port")/" \
    --sentence "$(sed -n 3p "$src/data/toy/test.zh")"
  rc=$?
  /usr/bin/python3 "$src/tests/cors_test.py" "$nmt" "$tmp/run" "$tmp" || rc=1
  exit $rc
fi

if [ "$mode" = --connections ]; then
  /usr/bin/python3 "$src/tests/serve_connections_test.py" "$nmt" "$tmp/run" "$tmp"
  exit $?
fi

head -40 "$src/data/toy/test.zh" >"$tmp/lines.zh"
/usr/bin/python3 "$src/tests/serve_api_test.py" "$nmt" "$tmp/run" "$tmp/lines.zh" "$tmp"
