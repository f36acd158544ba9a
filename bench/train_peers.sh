# shellcheck shell=bash
# Sourced by bench/bench_train.sh and bench/bench_train_ceiling.sh: what both
# need to run nmt and the PyTorch script side by side.

# PyTorch "as started": the environment a user's shell gives it, without
# the thread-pool settings a training run of nmt's leaves behind.
# shellcheck disable=SC2034  # read by the scripts that source this file
torch_as_started=(env -u OMP_WAIT_POLICY -u OPENBLAS_THREAD_TIMEOUT -u LD_PRELOAD)

# tokenizer_models NMT CONFIG DIR PREFIX: trains CONFIG one step into DIR (its
# tokenizers, the same ones every trainer then reads) and prints the folder
# of src.model and tgt.model; exit 1 with the log's last lines if it fails.
tokenizer_models() {
  local nmt=$1 config=$2 dir=$3 prefix=$4
  "$nmt" train --config "$config" --set train.max_steps=1 --set train.valid_bleu_sentences=0 \
    --set train.best_metric=loss --set train.valid_max_sentences=8 --set train.checkpoint_dir="$dir" \
    --set train.progress=false >"$dir.log" 2>&1 ||
    { echo "$prefix: $config does not train:" >&2; tail -3 "$dir.log" >&2; exit 1; }
  echo "$dir/tokenizer"
}
