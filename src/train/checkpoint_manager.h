// Owns a run's checkpoints: CHECKPOINT_DIR/last (every evaluation), best/
// (by train.best_metric) and the tokenizer models they carry. The one place
// that saves and resumes the full training state.
#pragma once


#include <string>

#include <functional>
#include <memory>

#include "checkpoint/checkpoint.h"
#include "checkpoint/run_lock.h"
#include "config/config.h"
#include "model/transformer.h"
#include "train/gradient_sync.h"

namespace nmt {

// How a training process starts with its run folder.
struct RunStart {
  // A run folder (its last/) or a checkpoint to continue from; empty for a
  // new run, whose tokenizers come with its prepared corpus (data/prepare.h).
  std::string resume;
  // A new run into a folder that holds checkpoints replaces them (else it is
  // refused: a typo in a config must not cost a finished run).
  bool overwrite = false;
  // Nothing will be saved (`--profile`): the folder's checkpoints stay as they are.
  bool profile = false;
  // Restarts of the group so far (DistributedEnv::restart_count): once
  // restarted, a run continues from its own folder's last checkpoint when it
  // has one, whatever `resume` says.
  int64_t restart = 0;
  // Called on rank 0 once the run's inputs are checked (the data files, the
  // checkpoint started or resumed from, the run folder) and before the long
  // work begins (preparing the corpus, building the model): where `nmt train`
  // prints the resolved config, so that a refused run ends on its one error
  // line instead of a page of config.
  std::function<void()> inputs_checked;
};

class CheckpointManager {
 public:
  // Rank 0 takes the run folder's lock first (run_lock.h) and holds it for
  // the manager's life: one writer per run folder. Under it, and only there,
  // a save cut short is recovered (checkpoint.h recover_checkpoints).
  // With several ranks only rank 0 touches the run folder and the
  // checkpoints: it publishes the tokenizer models to the others (through
  // `sync`), which keep them in a private temporary folder, and it alone saves.
  // Every rank makes sure the training corpus is prepared (data/prepare.h)
  // with the run's tokenizers: rank 0 first (a new run's tokenizers are
  // trained then), the others after it, finding it done when they share its disk.
  CheckpointManager(const Config& cfg, const RunStart& start, GradientSync& sync);
  ~CheckpointManager();

  // The run's own copies of the tokenizer models.
  const std::string& src_model() const { return src_model_; }
  const std::string& tgt_model() const { return tgt_model_; }
  bool resuming() const { return !resume_from_.empty(); }
  // The prepared training corpus (data/shards.h), encoded with those models.
  const std::string& corpus_dir() const { return corpus_dir_; }
  // Its target/source length ratio (data/prepare.h), which every save
  // records (TrainingState::target_source_ratio) for decoding's length limit.
  double corpus_ratio() const { return corpus_ratio_; }
  // What the resumed run's products computed in ("float32" or "bf16", from
  // its state.yaml), which precision auto keeps; "" for a new run, a
  // checkpoint saved before it was recorded, or ranks > 0 (rank 0 alone
  // reads the checkpoint).
  std::string resumed_precision() const;

  // When resuming (rank 0): copies the saved weights into model (in place:
  // they may be views of the optimizer's flat buffer) and loads the
  // optimizer state. Returns the saved state (a fresh one otherwise) on
  // every rank; weights reach the other ranks by TrainStep::broadcast_state.
  // A new run with train.init_from (rank 0): copies that checkpoint's
  // weights only (train/init_from.h) and returns a fresh state.
  TrainingState restore(Transformer& model, ops::FlatAdam& optimizer);
  // Writes last/ and, when best, best/ (rank 0; nothing elsewhere). With
  // train.keep_last N also step-STEP/ (the model without the optimizer
  // state), and the oldest of those beyond N are removed.
  void save(Transformer& model, const ops::FlatAdam& optimizer, const TrainingState& state,
            bool best) const;

  const std::string& run_dir() const { return run_dir_; }

 private:
  // The constructor's work: the inputs checked, the run folder taken, the
  // corpus prepared.
  void set_up(const Config& cfg, const RunStart& start, GradientSync& sync);
  // Rank 0: takes the lock, decides what the run resumes from ("" for a new
  // run) and tidies or clears the folder accordingly.
  std::string prepare_run_folder(const RunStart& start);
  // train.keep_last: saves step-STEP/ and removes the oldest beyond N.
  void keep(Transformer& model, const TrainingState& state) const;
  // A run that ends with no checkpoint saved (it failed while starting, was
  // a --profile run, or stopped before its first save) takes back what it
  // made in the run folder: the tokenizer copies, its metrics file and, in a
  // folder it created, the lock file and the folder itself. Anything else
  // found there stays.
  void remove_unsaved_run() noexcept;

  Config cfg_;
  GradientSync& sync_;
  std::unique_ptr<RunLock> lock_;  // rank 0: held while this run may write its folder
  // Rank 0: whether this run made the run folder, and its tokenizer/ (remove_unsaved_run).
  bool made_run_dir_ = false, made_tokenizer_dir_ = false;
  std::string run_dir_, resume_from_, src_model_, tgt_model_, corpus_dir_;
  double corpus_ratio_ = 0;
  std::string private_dir_;
  CheckpointFiles init_from_;  // rank 0, a new run with train.init_from: that checkpoint, until restore()
  CheckpointFiles resumed_;  // rank 0: the checkpoint resumed from, read whole, until restore()  // ranks > 0: their copies of the tokenizer models
};

// The config a resumed run continues with: the checkpoint's own (read only).
Config resume_config(const std::string& dir);

}  // namespace nmt
