#!/usr/bin/env bash
# The data path at scale: corpora of millions of pairs prepared once into
# shards (nmt prepare), and how soon and in how much memory nmt train starts
# on them, against the in-RAM path of an older build when one is given.
#
# Usage: bench/bench_data.sh [--sizes N,N] [--kinds repeat,distinct] [--baseline BUILD]
#                            [--train-minutes M] [--threads N] [--work DIR] [--out DIR]
#   defaults: --sizes 1000000,10000000 --kinds repeat,distinct, 2 minutes, 2 threads,
#             a temporary work folder, docs/bench
#   --baseline BUILD: a build folder whose nmt reads the corpus into RAM (an
#             nmt from before prepared corpora): its time to the first step and
#             peak RSS on the repeat corpora, and its training tokens/s
#             beside this build's (interleaved A B B A, configs/real.yaml)
#
# For each size and kind (bench/make_big_corpus.py: data/real/train repeated,
# or spliced into distinct pairs), with configs/real.yaml's settings:
#   prepare   nmt prepare from nothing: seconds, pairs/s, peak RSS
#   again     nmt prepare when it is up to date: seconds
#   start     nmt train from its start to the end of step 1 (the prepared
#             corpus ready): seconds, peak RSS (VmHWM, read while the trainer
#             is held there by a test hook)
#   nproc 2   the same with --nproc 2: the peak RSS of each rank
# Writes OUT/data.md (the table) and OUT/data.csv.
set -euo pipefail
cd "$(dirname "$0")/.."

sizes=1000000,10000000 kinds=repeat,distinct baseline="" minutes=2 threads=2 work="" out=docs/bench
while (($#)); do
  case $1 in
    --sizes) sizes=$2; shift 2 ;;
    --kinds) kinds=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --train-minutes) minutes=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_data: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
nmt=$(realpath "${NMT_BUILD_DIR:-build}/nmt")
[ -x "$nmt" ] || { echo "bench_data: no $nmt (run scripts/setup.sh)" >&2; exit 2; }
if [ -n "$baseline" ]; then
  baseline=$(realpath "$baseline/nmt")
  [ -x "$baseline" ] || { echo "bench_data: --baseline: no nmt program in it" >&2; exit 2; }
fi
[ -x /usr/bin/time ] || { echo "bench_data: needs GNU time (Debian: apt-get install time)" >&2; exit 2; }
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work" "$out"
csv=$out/data.csv
echo "corpus,pairs,build,measure,value,unit" >"$csv"
row() { echo "$1,$2,$3,$4,$5,$6" >>"$csv"; echo "bench_data: $1 $2 $3: $4 = $5 $6" >&2; }

# Runs "$@" (an nmt train) until it reaches the end of step 1, held there by
# NMT_TEST_HOLD; prints "SECONDS PEAK_KIB [PEAK_KIB of each rank...]" and kills it.
held_start() {
  local hold=$work/held.$$ t0 pid
  rm -f "$hold"
  t0=$(date +%s.%N)
  NMT_TEST_HOLD=train-step@1:$hold "$@" >"$work/start.log" 2>&1 &
  pid=$!
  while [ ! -e "$hold" ]; do
    kill -0 $pid 2>/dev/null || { echo "bench_data: training stopped before step 1:" >&2; tail -5 "$work/start.log" >&2; exit 1; }
    sleep 0.05
  done
  local t1 peaks="" p
  t1=$(date +%s.%N)
  sleep 0.5  # every rank past step 1
  for p in $pid $(pgrep -P $pid || true); do
    [ -r /proc/$p/status ] && peaks="$peaks $(awk '/^VmHWM/ {print $2}' /proc/$p/status)"
  done
  kill -9 $pid $(pgrep -P $pid || true) 2>/dev/null || true
  wait $pid 2>/dev/null || true
  awk -v a="$t0" -v b="$t1" -v p="$peaks" 'BEGIN { printf "%.1f%s\n", b - a, p }'
}

# In-RAM baselines start by reading and encoding everything: their time to
# step 1, measured the same way (its own log line, as it has no hold hook).
baseline_start() {
  local t0 pid rss=0 peak
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$work/base.rss" "$@" >"$work/base.log" 2>&1 &
  pid=$!
  while ! grep -q "^\[..:..:..\] step 1 " "$work/base.log" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { echo "bench_data: the baseline stopped before step 1:" >&2; tail -5 "$work/base.log" >&2; exit 1; }
    sleep 0.2
  done
  local t1
  t1=$(date +%s.%N)
  peak=$(for p in $(pgrep -P $pid); do awk '/^VmHWM/ {print $2}' /proc/$p/status; done | sort -n | tail -1)
  kill -9 $(pgrep -P $pid) 2>/dev/null || true
  wait $pid 2>/dev/null || true
  awk -v a="$t0" -v b="$t1" -v p="$peak" 'BEGIN { printf "%.1f %s\n", b - a, p }'
}

train_flags() {  # corpus prefix, run folder
  echo --config configs/real.yaml --set data.train_src="$1.zh" --set data.train_tgt="$1.en" \
    --set data.prepared_dir="$work/prepared" --set train.checkpoint_dir="$2" --set train.log_every=1 \
    --set train.progress=false --set train.threads="$threads"
}

IFS=, read -ra size_list <<<"$sizes"
IFS=, read -ra kind_list <<<"$kinds"
for n in "${size_list[@]}"; do
  for kind in "${kind_list[@]}"; do
    corpus=$work/$kind-$n
    echo "bench_data: making $corpus ($kind, $n pairs)" >&2
    python3 bench/make_big_corpus.py "$kind" "$n" "$corpus"
    row "$kind" "$n" nmt "corpus size" "$(du -m "$corpus.zh" "$corpus.en" | awk '{s += $1} END {print s}')" MB
    rm -rf "$work/prepared"
    # shellcheck disable=SC2046
    /usr/bin/time -f "%e %M" -o "$work/prep.time" "$nmt" prepare $(train_flags "$corpus" "$work/run" | sed 's/--set train.[a-z_]*=[^ ]*//g') \
      --threads "$threads" >"$work/prep.log" 2>&1 || { tail -5 "$work/prep.log" >&2; exit 1; }
    read -r secs kib <"$work/prep.time"
    row "$kind" "$n" nmt "prepare seconds" "$secs" s
    row "$kind" "$n" nmt "prepare pairs/s" "$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')" "pairs/s"
    row "$kind" "$n" nmt "prepare peak RSS" "$(awk -v k="$kib" 'BEGIN { printf "%.0f", k / 1024 }')" MiB
    row "$kind" "$n" nmt "prepared size" "$(du -sm "$work/prepared" | awk '{print $1}')" MB
    # shellcheck disable=SC2046
    /usr/bin/time -f "%e %M" -o "$work/again.time" "$nmt" prepare $(train_flags "$corpus" "$work/run" | sed 's/--set train.[a-z_]*=[^ ]*//g') \
      >"$work/again.log" 2>&1 || { tail -5 "$work/again.log" >&2; exit 1; }
    read -r secs kib <"$work/again.time"
    row "$kind" "$n" nmt "prepare again (up to date) seconds" "$secs" s
    rm -rf "$work/run"
    # shellcheck disable=SC2046
    read -r secs kib <<<"$(held_start "$nmt" train $(train_flags "$corpus" "$work/run"))"
    row "$kind" "$n" nmt "train: start to step 1" "$secs" s
    row "$kind" "$n" nmt "train: peak RSS at step 1" "$(awk -v k="$kib" 'BEGIN { printf "%.0f", k / 1024 }')" MiB
    rm -rf "$work/run"
    # shellcheck disable=SC2046
    read -r secs launcher r0 r1 <<<"$(held_start "$nmt" train $(train_flags "$corpus" "$work/run") --nproc 2 --threads 1)"
    row "$kind" "$n" nmt "train --nproc 2: start to step 1" "$secs" s
    row "$kind" "$n" nmt "train --nproc 2: peak RSS of rank 0" "$(awk -v k="${r0:-0}" 'BEGIN { printf "%.0f", k / 1024 }')" MiB
    row "$kind" "$n" nmt "train --nproc 2: peak RSS of rank 1" "$(awk -v k="${r1:-0}" 'BEGIN { printf "%.0f", k / 1024 }')" MiB
    if [ -n "$baseline" ] && [ "$kind" = repeat ]; then
      rm -rf "$work/run"
      # shellcheck disable=SC2046
      read -r secs kib <<<"$(baseline_start "$baseline" train $(train_flags "$corpus" "$work/run" | sed 's/--set data.prepared_dir=[^ ]*//') --set tokenizer.cache_dir="$work/tok")"
      row "$kind" "$n" baseline "train: start to step 1" "$secs" s
      row "$kind" "$n" baseline "train: peak RSS at step 1" "$(awk -v k="$kib" 'BEGIN { printf "%.0f", k / 1024 }')" MiB
    fi
    rm -rf "$work/run" "$work/prepared" "$corpus.zh" "$corpus.en"
  done
done

# Training speed on data/real: this build against the baseline, interleaved.
if [ -n "$baseline" ]; then
  tokens_per_s() {  # nmt -> tokens/s over the logged windows after the first
    local dir=$work/speed
    rm -rf "$dir"
    "$1" train --config configs/real.yaml --threads "$threads" --set train.max_minutes="$minutes" \
      --set train.max_steps=0 --set train.eval_every=1000000000 --set train.valid_bleu_sentences=0 \
      --set train.best_metric=loss --set train.valid_max_sentences=8 --set train.log_every=10 \
      --set train.progress=false --set train.checkpoint_dir="$dir" $2 >"$dir.log" 2>&1 ||
      { echo "bench_data: $1 train failed:" >&2; tail -5 "$dir.log" >&2; exit 1; }
    python3 - "$dir/metrics.jsonl" <<'PY'
import json, sys
w = [json.loads(l) for l in open(sys.argv[1]) if '"window_tokens"' in l][1:]
print(f"{sum(r['window_tokens'] for r in w) / sum(r['window_seconds'] for r in w):.1f}")
PY
  }
  for r in 1 2; do
    for who in $([ $r = 1 ] && echo "nmt baseline" || echo "baseline nmt"); do
      if [ $who = nmt ]; then v=$(tokens_per_s "$nmt" "--set data.prepared_dir=$work/prepared")
      else v=$(tokens_per_s "$baseline" "--set tokenizer.cache_dir=$work/tok"); fi
      row data/real 37099 $who "training tokens/s (run $r)" "$v" tokens/s
    done
  done
fi

python3 - "$csv" "$out/data.md" "$threads" "$minutes" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
threads, minutes = sys.argv[3], sys.argv[4]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
out = [f"# The data path at scale\n",
       f"`bench/bench_data.sh` on {cpu}, {threads} threads; configs/real.yaml's tokenizer and filters.\n",
       "| corpus | pairs | build | measure | value |", "|---|--:|---|---|--:|"]
for r in rows:
    out.append(f"| {r['corpus']} | {int(r['pairs']):,} | {r['build']} | {r['measure']} | {r['value']} {r['unit']} |")
speed = {}
for r in rows:
    if r["measure"].startswith("training tokens/s"):
        speed.setdefault(r["build"], []).append(float(r["value"]))
if "nmt" in speed and "baseline" in speed:
    a, b = statistics.median(speed["nmt"]), statistics.median(speed["baseline"])
    out.append(f"\nTraining on data/real over {minutes} minutes, median of two interleaved runs each: "
               f"{a:.0f} tokens/s from the shards against {b:.0f} from RAM ({a / b:.3f}x).")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
