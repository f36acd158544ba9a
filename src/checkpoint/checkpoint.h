// Checkpoint folders: model.pt, optimizer.pt, state.yaml, config.yaml and the
// tokenizer models, so a checkpoint alone is enough to translate.
#pragma once

#include <torch/nn.h>
#include <torch/optim.h>

#include <limits>
#include <memory>
#include <string>

#include "config/config.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace nmt {

struct TrainingState {
  int64_t step = 0;             // optimizer steps taken
  int64_t epoch = 0;            // epoch in progress (0-based)
  int64_t batch_in_epoch = 0;   // batches of that epoch already consumed
  double valid_loss = std::numeric_limits<double>::quiet_NaN();  // at this checkpoint
  double valid_bleu = std::numeric_limits<double>::quiet_NaN();  // at this checkpoint
  double best_valid_loss = std::numeric_limits<double>::infinity();
  double best_score = -std::numeric_limits<double>::infinity();  // by train.best_metric, higher is better
  int64_t evals_since_best = 0;  // for early stopping
};

// Writes DIR atomically (DIR.tmp, then rename): a reader never sees a half-written checkpoint.
void save_checkpoint(const std::string& dir, Transformer& model, torch::optim::Optimizer* optimizer,
                     const TrainingState& state, const Config& cfg, const std::string& src_model,
                     const std::string& tgt_model);

struct LoadedCheckpoint {
  std::string dir;  // the folder actually read (DIR, DIR/best or DIR/last)
  Config cfg;
  TrainingState state;
  Transformer model{nullptr};
  std::unique_ptr<Tokenizer> src_tok, tgt_tok;
};

// DIR may be a checkpoint itself or a run folder holding best/ or last/.
std::string resolve_checkpoint_dir(const std::string& dir);
// Loads model (on device, eval mode), config and tokenizers; InputError
// naming the file on anything missing or corrupt.
LoadedCheckpoint load_checkpoint(const std::string& dir, const c10::Device& device);
void load_optimizer(const std::string& dir, torch::optim::Optimizer& optimizer);
// The CPU random generator (dropout) as saved with the checkpoint (rng.pt).
void load_rng_state(const std::string& dir);
// DIR's training state (state.yaml) alone.
TrainingState load_training_state(const std::string& dir);

// Builds the model the config describes for the given vocabularies.
Transformer build_model(const Config& cfg, int64_t src_vocab, int64_t tgt_vocab);

}  // namespace nmt
