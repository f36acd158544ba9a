#!/usr/bin/env bash
# Every translation a build makes of a test split, under each decoding
# setting that has its own code path: greedy, beam 4 and beam 5 (length
# penalty 0.6), in float32, bf16 and int8, at batch 32 and batch 1, written
# to OUT/NAME.{greedy,beam4,beam5}.{float32,bf16,int8}.b{32,1}.en; and
# through the service (`nmt serve`, int8, greedy and beam 4: four clients
# sending 8 lines a request at once, so that requests share running
# batches) to OUT/NAME.serve.{greedy,beam4}.en. Two builds' folders compared
# with `diff -r` show whether a change that should not move a single output
# (a reorganisation of the decoding code) moved one.
#
# Usage: bench/decode_outputs.sh [--threads N] [--lines N] NMT OUT NAME:CHECKPOINT:SOURCE [...]
#   NMT: the nmt program of the build; OUT: a folder (created);
#   NAME:CHECKPOINT:SOURCE, e.g. toy:checkpoints/toy:data/toy/test.zh;
#   --lines N: the first N lines of each source only (default: all).
# bf16 runs where the CPU has AVX512-BF16 (elsewhere it is float32 widened, a
# path of its own that runs too).
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2 lines=0
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "decode_outputs: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($# >= 3)) || { echo "decode_outputs: give NMT OUT NAME:CHECKPOINT:SOURCE... (see --help)" >&2; exit 2; }
nmt=$1 out=$2
shift 2
[ -x "$nmt" ] || { echo "decode_outputs: $nmt: no such program" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for spec in "$@"; do
  IFS=: read -r name checkpoint source <<<"$spec"
  [ -e "$checkpoint" ] || { echo "decode_outputs: $checkpoint: no such checkpoint" >&2; exit 2; }
  [ -f "$source" ] || { echo "decode_outputs: $source: no such file" >&2; exit 2; }
  input=$source
  if ((lines > 0)); then input=$work/$name.zh; head -n "$lines" "$source" >"$input"; fi
  for search in greedy beam4 beam5; do
    case $search in
      greedy) flags=(--beam 0) ;;
      beam4) flags=(--beam 4 --length-penalty 0.6) ;;
      beam5) flags=(--beam 5 --length-penalty 0.6) ;;
    esac
    for type in float32 bf16 int8; do
      for batch in 32 1; do
        file=$out/$name.$search.$type.b$batch.en
        start=$(date +%s.%N)
        "$nmt" translate --checkpoint "$checkpoint" --input "$input" --output "$file" --threads "$threads" \
          --compute-type "$type" --batch-size "$batch" "${flags[@]}" 2>"$work/log" ||
          { echo "decode_outputs: $name $search $type batch $batch failed: $(tail -1 "$work/log")" >&2; exit 1; }
        printf '%-8s %-7s %-8s batch %-3s %6.1f s  %s\n' "$name" "$search" "$type" "$batch" \
          "$(echo "$(date +%s.%N) - $start" | bc)" "$(md5sum <"$file" | cut -c1-12)"
      done
    done
  done
  # The service: its own port, four clients at once.
  "$nmt" serve --checkpoint "$checkpoint" --port 0 --port-file "$work/port" --threads "$threads" \
    --compute-type int8 2>"$work/serve.log" &
  server=$!
  for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.05; done
  [ -s "$work/port" ] || { echo "decode_outputs: nmt serve did not start: $(tail -1 "$work/serve.log")" >&2; exit 1; }
  for search in greedy beam4; do
    beam=$([ $search = greedy ] && echo 0 || echo 4)
    /usr/bin/python3 - "$(cat "$work/port")" "$beam" "$input" "$out/$name.serve.$search.en" <<'PY'
import json, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
port, beam, source, output = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
lines = open(source, encoding="utf-8").read().splitlines()
chunks = [lines[i:i + 8] for i in range(0, len(lines), 8)]
def post(chunk):
    body = json.dumps({"text": chunk, "beam": beam}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/translate", body, {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=600))["translations"]
with ThreadPoolExecutor(4) as pool:
    done = list(pool.map(post, chunks))
with open(output, "w", encoding="utf-8") as f:
    f.writelines(t + "\n" for chunk in done for t in chunk)
PY
    printf '%-8s serve %-7s int8               %s\n' "$name" "$search" "$(md5sum <"$out/$name.serve.$search.en" | cut -c1-12)"
  done
  kill "$server"; wait "$server" 2>/dev/null || true
  rm -f "$work/port"
done
