# Sourced by the shell tests: tiny_config SRC_DIR TMP_DIR > FILE writes a
# config that trains a tiny model on the toy corpus in seconds; ok/bad count
# the checks (the script ends with [ $fail -eq 0 ]).
pass=${pass:-0} fail=${fail:-0}  # a script that counted before sourcing keeps its counts
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

tiny_config() {
  cat <<YAML
data: {train_src: $1/data/toy/train.zh, train_tgt: $1/data/toy/train.en, valid_src: $1/data/toy/valid.zh, valid_tgt: $1/data/toy/valid.en}
tokenizer: {cache_dir: $2/tok}
model: {d_model: 32, heads: 4, encoder_layers: 1, decoder_layers: 1, ff_dim: 64, dropout: 0.1}
attention: {backend: flash}
train: {batch_tokens: 800, max_steps: 30, max_minutes: 0, eval_every: 1000, valid_max_sentences: 16, valid_bleu_sentences: 0, best_metric: loss, log_every: 5, progress: false, threads: 1}
YAML
}
