// Checkpoint folders: model.pt, optimizer.pt, state.yaml, config.yaml and the
// tokenizer models, so a checkpoint alone is enough to translate. No random
// generator state: dropout masks are a function of (seed, step, position)
// (ops/random/philox.h), so a resumed run draws what it would have drawn.
#pragma once

#include <c10/core/Device.h>

#include <limits>
#include <map>
#include <memory>
#include <string>

#include "config/config.h"
#include "data/batch_source.h"
#include "model/transformer.h"
#include "ops/adam/flat_adam.h"
#include "tokenizer/tokenizer.h"

namespace nmt {

struct TrainingState {
  int64_t step = 0;       // optimizer steps taken
  DataPosition position;  // the next training batch
  // The metrics of the latest evaluation, by validator name ("loss", "bleu", ...).
  std::map<std::string, double> metrics;
  double best = std::numeric_limits<double>::quiet_NaN();  // best value of train.best_metric
  int64_t evals_since_best = 0;                             // for early stopping
};

// Writes DIR atomically (DIR.tmp, then rename): a reader never sees a half-written checkpoint.
void save_checkpoint(const std::string& dir, Transformer& model, const ops::FlatAdam* optimizer,
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
void load_optimizer(const std::string& dir, ops::FlatAdam& optimizer);

}  // namespace nmt
