// Owns a run's checkpoints: CHECKPOINT_DIR/last (every evaluation), best/
// (by train.best_metric) and the tokenizer models they carry. The one place
// that saves and resumes the full training state.
#pragma once


#include <string>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "model/transformer.h"
#include "train/gradient_sync.h"

namespace nmt {

class CheckpointManager {
 public:
  // resume: a run folder (its last/) or a checkpoint to continue from; empty
  // for a new run, whose tokenizers are trained (or reused from the cache).
  // With several ranks only rank 0 touches the run folder and the
  // checkpoints: it publishes the tokenizer models to the others (through
  // `sync`), which keep them in a private temporary folder, and it alone saves.
  CheckpointManager(const Config& cfg, const std::string& resume, GradientSync& sync);
  ~CheckpointManager();

  // The run's own copies of the tokenizer models.
  const std::string& src_model() const { return src_model_; }
  const std::string& tgt_model() const { return tgt_model_; }
  bool resuming() const { return !resume_from_.empty(); }
  const std::string& resume_from() const { return resume_from_; }

  // When resuming (rank 0): copies the saved weights into model (in place:
  // they may be views of the optimizer's flat buffer) and loads the
  // optimizer state. Returns the saved state (a fresh one otherwise) on
  // every rank; weights reach the other ranks by TrainStep::broadcast_state.
  TrainingState restore(Transformer& model, ops::FlatAdam& optimizer) const;
  // Writes last/ and, when best, best/ (rank 0; nothing elsewhere).
  void save(Transformer& model, const ops::FlatAdam& optimizer, const TrainingState& state,
            bool best) const;

  const std::string& run_dir() const { return run_dir_; }

 private:
  Config cfg_;
  GradientSync& sync_;
  std::string run_dir_, resume_from_, src_model_, tgt_model_;
  std::string private_dir_;  // ranks > 0: their copies of the tokenizer models
};

// The checkpoint `--resume DIR` continues from: DIR/last, or DIR itself.
std::string resume_checkpoint(const std::string& dir);
// The config a resumed run continues with: the checkpoint's own.
Config resume_config(const std::string& dir);

}  // namespace nmt
