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

#include "checkpoint/checkpoint_files.h"
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
  std::string optimizer_state;  // optimizer.pt's bytes, read with the rest for kResume
};

// Loads a checkpoint (DIR, or the run folder DIR's best/ or last/ as `use`
// says; checkpoint_files.h) without writing anything: every file is read
// from one save and verified against its manifest, then the model is built
// on `device` in eval mode. InputError naming the file on anything missing
// or corrupt.
LoadedCheckpoint load_checkpoint(const std::string& dir, const c10::Device& device,
                                 CheckpointUse use = CheckpointUse::kUse);
// The same from files read already (read_checkpoint with checkpoint_files(use)).
LoadedCheckpoint load_checkpoint(const CheckpointFiles& files, const c10::Device& device);
// The files a load for `use` reads: the model's, plus optimizer.pt for kResume.
std::vector<std::string> checkpoint_files(CheckpointUse use);
// The optimizer moments a kResume load read along with the weights.
void load_optimizer(const LoadedCheckpoint& ck, ops::FlatAdam& optimizer);

// The writer's side of an interrupted save, for `nmt train` holding the
// run's lock only: recover_directory() for DIR, DIR/best and DIR/last
// (a missing folder is put back from its complete DIR.tmp or DIR.old;
// leftovers are deleted). Returns what it did, also logged.
std::string recover_checkpoints(const std::string& run_dir);

}  // namespace nmt
