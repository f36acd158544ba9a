// The writing side of checkpoint folders (the training library): a crash-safe
// save, and the repair of a save cut short, which only a trainer holding the
// run's lock (checkpoint/run_lock.h) may do. checkpoint/checkpoint.h reads them.
#pragma once

#include <string>

#include "checkpoint/checkpoint.h"

namespace nmt {

// Writes the checkpoint folder DIR crash-safely: every file is staged in
// DIR.tmp through util/atomic_file.h, manifest.txt (sizes and SHA-256) last,
// then the folder is swapped in (util/atomic_file.h replace_directory), so
// that DIR names a complete checkpoint, old or new, at every instant. IoError
// (exit 1) naming the file when a write fails; the previous DIR stays.
void save_checkpoint(const std::string& dir, Transformer& model, const ops::FlatAdam* optimizer,
                     const TrainingState& state, const Config& cfg, const std::string& src_model,
                     const std::string& tgt_model);

// The tokenizer models given as their bytes (as a loaded checkpoint holds them).
struct TokenizerBytes {
  const std::string& src_model;
  const std::string& tgt_model;
};
void save_checkpoint(const std::string& dir, Transformer& model, const ops::FlatAdam* optimizer,
                     const TrainingState& state, const Config& cfg, const TokenizerBytes& tokenizers);

// The writer's side of an interrupted save, for `nmt train` holding the
// run's lock only: recover_directory() for DIR, DIR/best, DIR/last and the
// kept saves DIR/step-N (a missing folder is put back from its complete
// DIR.tmp or DIR.old; leftovers are deleted). Returns what it did, also logged.
std::string recover_checkpoints(const std::string& run_dir);

// A checkpoint saved before nmt wrote model.safetensors, made readable by
// the runtime alone: its model.pt verified and written out as
// model.safetensors, then its manifest rewritten to list it (atomically,
// so a reader sees the checkpoint before or after, never between). Returns
// false, writing nothing, when it has model.safetensors already. The
// caller holds the run's lock where there is one (`nmt convert`).
bool add_model_safetensors(const std::string& checkpoint_dir);

}  // namespace nmt
