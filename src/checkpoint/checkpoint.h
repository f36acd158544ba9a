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

#include "checkpoint/state.h"
#include "config/config.h"
#include "model/transformer.h"
#include "ops/adam/flat_adam.h"
#include "tokenizer/tokenizer.h"

namespace nmt {

// Writes the checkpoint folder DIR crash-safely: every file is staged in
// DIR.tmp through util/atomic_file.h, manifest.txt (sizes and SHA-256) last,
// then the folder is swapped in (util/atomic_file.h replace_directory), so
// that DIR names a complete checkpoint, old or new, at every instant. IoError
// (exit 1) naming the file when a write fails; the previous DIR stays.
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
// Repairs what an interrupted save left behind first (with a log line).
std::string resolve_checkpoint_dir(const std::string& dir);
// recover_directory() for DIR, DIR/best and DIR/last; returns what it did.
std::string recover_checkpoints(const std::string& dir);
// Verifies the manifest, then loads model (on device, eval mode), config and
// tokenizers; InputError naming the file on anything missing or corrupt.
LoadedCheckpoint load_checkpoint(const std::string& dir, const c10::Device& device);
void load_optimizer(const std::string& dir, ops::FlatAdam& optimizer);

}  // namespace nmt
