#!/usr/bin/env bash
# Translation throughput: `nmt translate` on a checkpoint, greedy and beam 4,
# at batch 64 (the whole input) and batch 1 (its first --lines lines), as
# sentences/s and target tokens/s (the translations' SentencePiece pieces).
# With --baseline BINARY, the same runs with another nmt build first, and
# this build again with the length limit off (--max-len-factor 0), which
# must give byte-identical output to the baseline: the speed-up without
# changing a single translation. Writes OUT/decode.md.
#
# Usage: bench/bench_decode.sh CHECKPOINT [--input FILE] [--lines N] [--beam-lines N] [--baseline NMT] [--out DIR]
#   defaults: data/real/test.zh, 300 lines at batch 1, all lines for beam 4
#   at batch 64 (--beam-lines: the first N only), docs/bench
set -euo pipefail
cd "$(dirname "$0")/.."

input=data/real/test.zh lines=300 beam_lines=0 baseline= out=docs/bench checkpoint=
while (($#)); do
  case $1 in
    --input) input=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    --beam-lines) beam_lines=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "bench_decode: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) checkpoint=$1; shift ;;
  esac
done
[ -n "$checkpoint" ] || { echo "bench_decode: no CHECKPOINT (see --help)" >&2; exit 2; }
[ -f "$input" ] || { echo "bench_decode: $input: no such file" >&2; exit 2; }
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "bench_decode: $baseline: not an executable" >&2; exit 2; }
nmt=${NMT_BUILD_DIR:-build}/nmt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
head -n "$lines" "$input" >"$work/head.txt"
if [ "$beam_lines" -gt 0 ]; then head -n "$beam_lines" "$input" >"$work/beam.txt"; else cp "$input" "$work/beam.txt"; fi
tgt_model=
for m in "$checkpoint"/tgt.model "$checkpoint"/best/tgt.model "$checkpoint"/last/tgt.model; do
  [ -f "$m" ] && { tgt_model=$m; break; }
done
[ -n "$tgt_model" ] || { echo "bench_decode: $checkpoint: no tgt.model (not a checkpoint?)" >&2; exit 2; }
echo "build,decoding,batch,lines,seconds,sentences_per_s,tokens_per_s,identical" >"$work/decode.csv"

run() {  # label binary beam batch [flags...]
  local label=$1 bin=$2 beam=$3 batch=$4
  shift 4
  local in=$input
  [ "$beam" -gt 0 ] && in=$work/beam.txt
  [ "$batch" -eq 1 ] && in=$work/head.txt
  local hyp=$work/${label}_${beam}_$batch.txt
  local log
  log=$("$bin" translate --checkpoint "$checkpoint" --input "$in" --output "$hyp" --beam "$beam" \
    --batch-size "$batch" "$@" 2>&1 | grep 'translated [0-9]* lines')
  local n s
  n=$(sed -n 's/.*translated \([0-9]*\) lines in \([0-9.]*\) s.*/\1/p' <<<"$log")
  s=$(sed -n 's/.*translated \([0-9]*\) lines in \([0-9.]*\) s.*/\2/p' <<<"$log")
  local tokens
  tokens=$(/usr/bin/python3 -c "
import sentencepiece as spm, sys
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
print(sum(len(sp.encode(l.rstrip('\n'))) for l in open(sys.argv[2], encoding='utf-8')))" "$tgt_model" "$hyp")
  local same=
  [ "$label" = "after_no_limit" ] && { cmp -s "$hyp" "$work/before_${beam}_$batch.txt" && same=yes || same=NO; }
  echo "$label,$([ "$beam" = 0 ] && echo greedy || echo "beam $beam"),$batch,$n,$s,$(awk "BEGIN{printf \"%.1f\", $n/$s}"),$(awk "BEGIN{printf \"%.0f\", $tokens/$s}"),$same" |
    tee -a "$work/decode.csv"
}

for beam in 0 4; do
  for batch in 64 1; do
    if [ -n "$baseline" ]; then
      run before "$baseline" $beam $batch
      run after_no_limit "$nmt" $beam $batch --max-len-factor 0
    fi
    run after "$nmt" $beam $batch
  done
done
cp "$work/decode.csv" "$out/decode.csv"
/usr/bin/python3 - "$work/decode.csv" "$out/decode.md" "$checkpoint" "$input" "$lines" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
path, ck, inp, lines = sys.argv[2:]
names = {"before": "baseline build", "after_no_limit": "this build, no length limit", "after": "this build"}
out = [f"# Translation throughput: {ck} on {inp}", "",
       f"Batch 64 translates the whole file (beam 4: see the lines column of decode.csv), batch 1 its first {lines} lines; tokens are the "
       "translations' target pieces. 2 threads.", "",
       "| build | decoding | batch | sentences/s | tokens/s | output identical to the baseline |",
       "|---|---|--:|--:|--:|---|"]
for r in rows:
    out.append(f"| {names[r['build']]} | {r['decoding']} | {r['batch']} | {r['sentences_per_s']} | "
               f"{r['tokens_per_s']} | {r['identical']} |")
base = {(r["decoding"], r["batch"]): float(r["sentences_per_s"]) for r in rows if r["build"] == "before"}
if base:
    out += ["", "| decoding | batch | speed-up, same output | speed-up with the default length limit |",
            "|---|--:|--:|--:|"]
    for r in rows:
        if r["build"] != "after":
            continue
        key = (r["decoding"], r["batch"])
        same = next(float(x["sentences_per_s"]) for x in rows if x["build"] == "after_no_limit" and (x["decoding"], x["batch"]) == key)
        out.append(f"| {key[0]} | {key[1]} | {same / base[key]:.2f}x | {float(r['sentences_per_s']) / base[key]:.2f}x |")
open(path, "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
