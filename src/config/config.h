// Typed configuration. YAML is read in config.cpp only; everything else sees
// these structs. Every field has a default and a comment; configs/toy.yaml
// carries the same comments for users.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nmt/types.h"
#include "util/device_choices.h"

namespace nmt {

struct DataConfig {
  std::string train_src = "data/toy/train.zh";  // training source (one sentence a line)
  std::string train_tgt = "data/toy/train.en";  // training target, line-aligned with train_src
  std::string valid_src = "data/toy/valid.zh";  // validation source
  std::string valid_tgt = "data/toy/valid.en";  // validation target
  std::string test_src = "data/toy/test.zh";    // test source (used by the demo's evaluation)
  std::string test_tgt = "data/toy/test.en";    // test target
  int64_t max_len = 64;  // pairs with more tokens than this (either side) are skipped in training
  double max_length_ratio = 0;   // pairs whose token counts differ more than this factor are skipped (0: off)
  bool dedupe = false;           // exact duplicate pairs are skipped (the first is kept)
  bool skip_invalid_lines = false;  // a line that is not UTF-8 (or holds a NUL) is skipped and counted, not an error
  std::string prepared_dir = "checkpoints/prepared";  // prepared corpora (data/prepare.h), one folder each
};

struct TokenizerConfig {
  bool shared = false;             // one SentencePiece model for both languages
  int64_t src_vocab_size = 800;    // source (or shared) vocabulary size
  std::string model_type = "unigram";  // SentencePiece model type: unigram | bpe | char | word
  int64_t tgt_vocab_size = 600;    // target vocabulary size (ignored when shared)
  double src_character_coverage = 0.9995;  // high for Chinese: rare characters stay pieces
  double tgt_character_coverage = 1.0;     // English: every character
  std::string normalization = "identity";  // SentencePiece normalization: identity | nmt_nfkc | nfkc
  bool byte_fallback = false;      // rare characters become UTF-8 byte pieces instead of <unk>
  bool placeholder_symbols = false;  // printf conversions, markup tags, "--": always single pieces
  // Placeholders become indexed sentinel symbols before tokenization and are
  // restored after decoding (data/placeholder_mask.h): training, translation,
  // evaluation and the service all do it, as the checkpoint's config says.
  bool protect_placeholders = false;
  int64_t sample_lines = 2000000;  // tokenizers are trained on a uniform sample of at most this many pairs
};

struct ModelConfig {
  int64_t d_model = 128;         // hidden size C
  int64_t heads = 4;             // attention heads H; must divide d_model
  int64_t encoder_layers = 2;    // encoder depth
  int64_t decoder_layers = 2;    // decoder depth
  int64_t ff_dim = 512;          // feed-forward inner size
  double dropout = 0.1;          // dropout on sublayer outputs and embeddings
  double activation_dropout = -1;  // dropout inside the feed-forward block, after its ReLU (-1: model.dropout)
  double attention_dropout = 0;    // dropout on the attention probabilities
  std::string norm = "pre";        // pre: x + f(LayerNorm(x)), final norms; post: LayerNorm(x + f(x))
  bool tie_embeddings = true;    // output projection shares the target embedding matrix
  bool tie_all = false;          // source and target embeddings and output projection: one matrix (needs tokenizer.shared)
  int64_t max_positions = 256;   // longest sequence the sinusoidal table covers
};

struct AttentionConfig {
  AttentionBackend backend = AttentionBackend::kTorch;  // torch (LibTorch built-in) | naive | flash
  Device device = Device::kCpu;                         // cpu | cuda | auto (cuda when available)
};

struct TrainConfig {
  std::string checkpoint_dir = "checkpoints/toy";  // where last/, best/ and metrics.jsonl go
  uint64_t seed = 1;              // seeds parameters, dropout and data order
  int64_t threads = 0;            // intra-op threads; 0 = all cores
  Precision precision = Precision::kFloat32;  // matrix multiplies in float32 | bf16 | auto (bf16 where the CPU has AVX512-BF16/AMX); float32 master weights
  int64_t batch_tokens = 2000;    // batch size in target+source tokens (0 = use batch_sentences)
  int64_t batch_sentences = 0;    // batch size in sentence pairs (used when batch_tokens = 0)
  int64_t max_steps = 4000;       // stop after this many optimizer steps (0 = no limit)
  int64_t max_epochs = 0;         // stop after this many epochs (0 = no limit)
  double max_minutes = 0;         // stop after this much wall time (0 = no limit)
  double lr = 2e-3;               // peak learning rate, reached after the warmup
  // inverse_sqrt: linear warmup, then lr * sqrt(warmup / step); linear and
  // cosine: warmup, then decay to min_lr at the end of the run's budget
  // (max_steps or max_minutes, whichever ends it first: scheduler.h).
  std::string lr_schedule = "inverse_sqrt";
  double min_lr = 0;              // where linear and cosine end; inverse_sqrt's floor
  int64_t warmup_steps = 200;     // linear warmup over this many steps ...
  double warmup_share = 0;        // ... or over this share of the budget (0: warmup_steps)
  double adam_beta1 = 0.9;        // Adam beta1
  double adam_beta2 = 0.98;       // Adam beta2
  double adam_eps = 1e-9;         // Adam epsilon
  double weight_decay = 0.0;      // Adam (L2) weight decay
  double label_smoothing = 0.1;   // cross-entropy label smoothing
  double clip_norm = 1.0;         // global gradient-norm clip (0 = off)
  // An exponential moving average of the weights, updated every step with
  // this decay (e.g. 0.9999; 0 = off), is what validation, best/, last/ and
  // so translate, serve and export use; training goes on from the raw weights.
  double ema_decay = 0.0;
  bool ema_step_dependent = false;  // decay min(ema_decay, (1 + step) / (10 + step)) (Marian's)
  int64_t keep_last = 0;          // also keep the last N saves as CHECKPOINT_DIR/step-N (0 = off), e.g. for nmt average
  int64_t skip_nonfinite_steps = 0;  // skip up to this many updates with a non-finite gradient, then stop
  int64_t log_every = 50;         // log a line every N steps
  int64_t eval_every = 500;       // validate (and maybe save best) every N steps
  int64_t valid_max_sentences = 0;  // validate on at most this many pairs (0 = all)
  int64_t valid_bleu_sentences = 500;  // greedy-decode this many of them for BLEU (0 = no BLEU)
  std::string best_metric = "bleu";    // best/ checkpoint by: bleu | chrf | exact (higher is better) | loss (lower)
  int64_t patience = 0;             // stop after this many evals without improvement (0 = never)
  double stop_at_bleu = 0;          // stop once validation BLEU reaches this (0 = never; no effect while BLEU is not measured)
  std::string metrics_file = "";    // JSON lines of every log/eval ("" = CHECKPOINT_DIR/metrics.jsonl)
  bool progress = true;           // live progress line when stderr is a terminal
  // A checkpoint (or run folder: its best/, else last/) whose weights and
  // tokenizers a new run starts from, with a fresh optimizer and schedule
  // (fine-tuning); "" = none. Its model shape and tokenizer settings must be
  // this config's.
  std::string init_from = "";
};

struct DecodeConfig {
  int64_t max_len = 80;       // stop decoding after this many target tokens
  // ... or after max_len_factor × the source's tokens + 5, if fewer (0: off).
  // A model that has not converged can babble on to max_len; this bounds it
  // by what a translation of that source could plausibly need. Unset
  // ("auto", the default): derived from the training corpus's target/source
  // length ratio (runtime/length_limit.h), which a fixed factor cannot know:
  // word-sized source pieces and letter-sized target pieces need a factor
  // of 10 and more.
  std::optional<double> max_len_factor;
  int64_t batch_size = 64;    // sentences decoded together
  // With tokenizer.protect_placeholders: each translation carries every
  // placeholder of its source exactly as often as the source has it
  // (decode/placeholder_constraint.h). false: the model alone decides.
  bool placeholder_constraint = true;
  // The dense layers' arithmetic when translating on the CPU: float32 as
  // trained, bf16, int8 (weights per output column, activations per row),
  // or auto (int8 where the CPU has AVX2 or AVX-512 VNNI, else float32).
  // On a GPU: float32 or bf16 (auto: float32). --compute-type wins.
  ComputeType compute_type = ComputeType::kFloat32;
  // translate, evaluate, check-po and serve decode with these unless told
  // otherwise (--beam, --length-penalty, a request's "beam"); validation
  // during training stays greedy (a cheaper proxy, and the same for every
  // config). 0 = greedy, K >= 1 = beam search of K.
  int64_t beam = 0;
  double length_penalty = 0.0;  // GNMT alpha for beam search (0 = none)
};

struct Config {
  DataConfig data;
  TokenizerConfig tokenizer;
  ModelConfig model;
  AttentionConfig attention;
  TrainConfig train;
  DecodeConfig decode;

  // Where each key was set ("file:line" or "--set"), for error messages.
  std::map<std::string, std::string> origin;
  std::string source_name;  // the file the config came from
};

// Reads and validates a YAML config file. Throws InputError with
// "FILE:LINE: key.path: problem" on any problem.
Config load_config(const std::string& path);
// Same, from text (checkpoints store their resolved config this way).
Config parse_config(const std::string& yaml_text, const std::string& source_name);
// Applies "key.path=value" assignments (each validated as in a file), then
// the cross-key checks once. Throws InputError and leaves cfg unchanged when
// any of it fails.
void apply_overrides(Config& cfg, const std::vector<std::string>& assignments);
void apply_override(Config& cfg, const std::string& assignment);
// Cross-field checks; called by the loaders and after overrides.
void validate(const Config& cfg);
// The fully resolved config as YAML (every key, with its value).
std::string to_yaml(const Config& cfg);
// The keys of `section` ("model", ...), and one key's value as YAML text
// (as to_yaml writes it), for comparing two configs key by key.
std::vector<std::string> config_keys(const std::string& section);
std::string config_value(const Config& cfg, const std::string& key);

}  // namespace nmt
