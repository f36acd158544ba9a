#!/usr/bin/env bash
# A user's path through nmt on one device, end to end, with the recipe's
# options on: what a CUDA build should show on a GPU beside the CUDA test
# cases (scripts/gpu_check.sh and bench/bench_gpu.sh run those), and what
# any build shows on the CPU. About 1.5 minutes on an H200, 2 on a 2-core CPU.
#   1. configs/toy.yaml trained for 0.6 minutes in bf16 with an EMA of the
#      weights, the last 3 saves kept (train.keep_last), a cosine schedule
#      with a warmup share; then resumed to 0.9 minutes
#   2. nmt average of the kept saves
#   3. nmt evaluate of the test set, greedy and beam 4, dense layers in
#      float32 and bf16, and of the averaged checkpoint (BLEU printed)
#   4. nmt translate from stdin (3 lines in, 3 out)
#   5. nmt check-causality with each attention backend
#   6. fine-tuning: a new run from the first one (train.init_from)
#   7. nmt serve on 127.0.0.1, an ephemeral port: one POST /v1/translate
#      with beam 4, then SIGTERM, which must stop it with exit 0
# Prints a PASS or FAIL line per check (a FAIL with the log's last lines).
#
# Usage: scripts/user_path_check.sh [--nmt PATH] [--device cpu|cuda] [--work DIR]
#   defaults: build/nmt, cuda, a temporary folder (removed at the end;
#   a --work folder is kept, with every command's log)
# Exit 0 when every check passed, 1 when one failed, 2 on bad arguments.
set -uo pipefail
cd "$(dirname "$0")/.."
nmt=build/nmt dev=cuda w=
while (($#)); do
  case $1 in
    --nmt) nmt=$2; shift 2 ;;
    --device) dev=$2; shift 2 ;;
    --work) w=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "user_path_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $dev in cpu|cuda) ;; *) echo "user_path_check: --device: '$dev' is not one of: cpu | cuda" >&2; exit 2 ;; esac
[ -x "$nmt" ] || { echo "user_path_check: --nmt $nmt: not an executable" >&2; exit 2; }
if [ -z "$w" ]; then
  w=$(mktemp -d)
  trap 'rm -rf "$w"' EXIT
fi
mkdir -p "$w"
fails=0
ok() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
# step NAME COMMAND...: runs it with its output in WORK/NAME.log.
step() {
  local name=$1 t0=$SECONDS rc=0; shift
  "$@" >"$w/$name.log" 2>&1 || rc=$?
  if ((rc == 0)); then ok "$name ($((SECONDS - t0)) s)"
  else bad "$name, exit $rc ($((SECONDS - t0)) s): $(tail -n 3 "$w/$name.log" | tr '\n' '|')"; fi
  return $rc
}
bleu() { grep -h '^BLEU' "$w/$1.log" | sed 's/^/  /'; }

run=(--config configs/toy.yaml --device "$dev" --set train.checkpoint_dir="$w/run" --set data.prepared_dir="$w/prep"
  --set train.precision=bf16 --set train.max_steps=0 --set train.eval_every=150 --set train.keep_last=3
  --set train.ema_decay=0.999 --set train.lr_schedule=cosine --set train.warmup_share=0.1 --set train.log_every=50)
step train "$nmt" train "${run[@]}" --set train.max_minutes=0.6
step resume "$nmt" train "${run[@]}" --set train.max_minutes=0.9 --resume "$w/run"
step average "$nmt" average --output "$w/avg" --checkpoints "$w"/run/step-*
for beam in 0 4; do
  for ct in float32 bf16; do
    step "evaluate-beam$beam-$ct" "$nmt" evaluate --checkpoint "$w/run" --src data/toy/test.zh --ref data/toy/test.en \
      --device "$dev" --beam $beam --compute-type $ct && bleu "evaluate-beam$beam-$ct"
  done
done
step evaluate-average "$nmt" evaluate --checkpoint "$w/avg" --src data/toy/test.zh --ref data/toy/test.en \
  --device "$dev" && bleu evaluate-average
if head -n 3 data/toy/test.zh | "$nmt" translate --checkpoint "$w/run" --device "$dev" >"$w/translate.txt" \
    2>"$w/translate.log" && [ "$(wc -l <"$w/translate.txt")" -eq 3 ]; then
  ok "translate from stdin: $(head -n 1 "$w/translate.txt")"
else
  bad "translate from stdin: $(tail -n 2 "$w/translate.log" | tr '\n' '|')"
fi
for backend in torch naive flash; do
  step "check-causality-$backend" "$nmt" check-causality --checkpoint "$w/run" --device "$dev" --attention $backend
done
step fine-tune "$nmt" train --config configs/toy.yaml --device "$dev" --set train.checkpoint_dir="$w/fine_tune" \
  --set data.prepared_dir="$w/prep" --set train.init_from="$w/run" --set train.max_minutes=0.15 \
  --set train.max_steps=0 --set train.eval_every=100

"$nmt" serve --checkpoint "$w/run" --device "$dev" --port 0 --port-file "$w/port" >"$w/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [ -s "$w/port" ] || ! kill -0 $pid 2>/dev/null && break; sleep 0.1; done
if [ -s "$w/port" ]; then
  python3 - "$(cat "$w/port")" >"$w/request.log" 2>&1 <<'PY' && ok "serve: $(cat "$w/request.log")" || bad "serve: $(tail -n 2 "$w/request.log")"
import json, sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/translate",
                             data=json.dumps({"text": ["我和他不喜欢跳舞", "你昨天丢了一把钥匙"], "beam": 4}).encode(),
                             headers={"Content-Type": "application/json"})
body = json.load(urllib.request.urlopen(req, timeout=120))
assert len(body["translations"]) == 2, body
print(json.dumps(body, ensure_ascii=False)[:300])
PY
else
  bad "serve never listened: $(tail -n 3 "$w/serve.log" | tr '\n' '|')"
fi
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
((rc == 0)) && ok "serve stopped by SIGTERM, exit 0" || bad "serve exit $rc after SIGTERM: $(tail -n 3 "$w/serve.log" | tr '\n' '|')"
echo "user_path_check on $dev: $fails failed"
((fails == 0))
