#include "train/checkpoint_manager.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include "checkpoint/manifest.h"
#include "data/prepare.h"
#include "data/text_io.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint_writer.h"
#include "train/init_from.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

Config resume_config(const std::string& dir) {
  const CheckpointFiles files = read_checkpoint(dir, CheckpointUse::kResume, {"config.yaml"});
  return parse_config(files.at("config.yaml"), files.path("config.yaml"));
}

std::string CheckpointManager::prepare_run_folder(const RunStart& start) {
  std::error_code ec;
  made_run_dir_ = !fs::exists(run_dir_, ec);
  lock_ = std::make_unique<RunLock>(run_dir_);
  if (start.profile) return "";
  std::string resume = start.resume;
  if (start.restart > 0) {
    const bool saved = !checkpoints_in(run_dir_).empty();
    spdlog::warn("train: restart {}: {}", start.restart,
                 saved ? "continuing from " + run_dir_ + "'s last checkpoint"
                       : (resume.empty() ? "no checkpoint saved yet, starting afresh" : "no checkpoint saved yet, resuming " + resume + " again"));
    if (saved) resume = run_dir_;
  }
  if (!resume.empty()) {
    // A checkpoint of another run, resumed into a folder holding this one's
    // checkpoints, would replace them at the first save. A checkpoint whose
    // config names this folder (a copy of one of its saves) is this run's.
    if (start.restart == 0 && !same_folder(run_folder_of(resume), run_dir_)) {
      const std::vector<std::string> held = checkpoints_in(run_dir_);
      const std::string its_dir = held.empty() ? run_dir_ : resume_config(resume).train.checkpoint_dir;
      if (!same_folder(its_dir, run_dir_))
        throw InputError("train.checkpoint_dir: " + run_dir_ + " holds another run's checkpoints (" + held.front() +
                         "/); resuming " + resume + " (a checkpoint of " + its_dir +
                         ") would replace them: train into another folder (--set train.checkpoint_dir=DIR)");
    }
    recover_checkpoints(run_dir_);  // ours to tidy now that we hold the lock
    return resume;
  }
  const std::vector<std::string> held = checkpoints_in(run_dir_);
  if (held.empty()) return "";
  std::string names;
  for (const auto& h : held) names += (names.empty() ? "" : ", ") + h + "/";
  if (!start.overwrite)
    throw InputError(run_dir_ + ": already holds checkpoints (" + names + "); continue that run with `nmt train --resume " +
                     run_dir_ + "`, train into another folder (--set train.checkpoint_dir=DIR), or replace it with --overwrite");
  // Only checkpoints go: every folder is judged before the first is deleted,
  // so a folder of someone else's named last/ or best/ stops --overwrite
  // with nothing removed.
  std::vector<std::string> doomed;
  std::vector<std::string> subs{"last", "best"};
  for (const std::string& kept : kept_checkpoints_in(run_dir_)) subs.push_back(kept);
  for (const std::string& sub : subs)
    for (const char* suffix : {"", ".tmp", ".old"}) {
      const std::string p = (fs::path(run_dir_) / (sub + suffix)).string();
      if (const std::string foreign = first_foreign_entry(p, is_checkpoint_file_name); !foreign.empty())
        throw InputError(foreign + ": not written by nmt (" + p + " should hold a checkpoint); --overwrite "
                         "replaces only checkpoints: move it away or train into another folder");
      doomed.push_back(p);
    }
  for (const std::string& p : doomed) remove_owned_tree(p, is_checkpoint_file_name, "a checkpoint");
  sync_directory(run_dir_);
  spdlog::info("train: --overwrite: removed {} from {}", names, run_dir_);
  return "";
}

CheckpointManager::CheckpointManager(const Config& cfg, const RunStart& start, GradientSync& sync)
    : cfg_(cfg), sync_(sync), run_dir_(cfg.train.checkpoint_dir) {
  // A constructor that throws runs no destructor: what it made goes here.
  try {
    set_up(cfg, start, sync);
  } catch (...) {
    if (lock_) remove_unsaved_run();
    throw;
  }
}

void CheckpointManager::set_up(const Config& cfg, const RunStart& start, GradientSync& sync) {
  // Fine-tuning: the checkpoint started from is read and checked against
  // the config before the run folder is touched (a mismatch leaves nothing
  // behind). One of this run's own folder would be replaced (--overwrite) or
  // refused.
  if (sync.rank() == 0 && start.resume.empty() && !cfg.train.init_from.empty()) {
    const std::string from = run_folder_of(cfg.train.init_from);
    if (!from.empty() && same_folder(from, run_dir_))
      throw InputError("train.init_from: " + cfg.train.init_from + " is a checkpoint of this run's folder (" +
                       "train.checkpoint_dir " + run_dir_ + "): fine-tune into another folder " +
                       "(--set train.checkpoint_dir=DIR)");
    init_from_ = read_init_checkpoint(cfg);
    if (!init_from_.note.empty()) spdlog::warn("checkpoint: {}", init_from_.note);
  }
  // A new run's data are checked before the run folder is touched (a
  // missing file leaves nothing behind), and before minutes go into
  // preparing the corpus (the training files first, as a user reads a config).
  if (sync.rank() == 0 && start.resume.empty() && start.restart == 0 && !start.profile) {
    for (const std::string& f : {cfg.data.train_src, cfg.data.train_tgt})
      if (::access(f.c_str(), R_OK) != 0)
        throw InputError(f + ": cannot open training data: " + std::strerror(errno));
    check_parallel_text(cfg.data.valid_src, cfg.data.valid_tgt);
  }
  // Rank 0 decides whether the run resumes, and from where; the others follow
  // (a rank on another host may not even see the run folder).
  std::string resume = sync.rank() == 0 ? prepare_run_folder(start) : "";
  if (sync.rank() == 0 && start.inputs_checked) start.inputs_checked();
  if (sync.world_size() > 1) resume = sync.set_and_wait("resume", "from:" + resume).substr(5);
  resume_from_ = resume;
  if (sync.rank() == 0) {
    // The checkpoint is read once, whole: the tokenizers, weights and
    // optimizer state all come from one save even if another process is
    // saving into the folder resumed from.
    if (!resume.empty()) {
      resumed_ = read_checkpoint(resume, CheckpointUse::kResume, checkpoint_files(CheckpointUse::kResume));
      if (!resumed_.note.empty()) spdlog::warn("checkpoint: {}", resumed_.note);
      resume_from_ = resumed_.dir;
      init_from_ = {};  // a restarted group continues from its own checkpoint
    }
  }
  if (sync.rank() != 0) {
    // Rank 0's tokenizer models, whether or not this host shares its disk.
    private_dir_ = (fs::temp_directory_path() /
                    ("nmt-rank" + std::to_string(sync.rank()) + "-" + std::to_string(::getpid())))
                       .string();
    fs::create_directories(private_dir_);
    std::string bytes[2];
    int k = 0;
    for (const auto& [name, path] : {std::pair{"src.model", &src_model_}, std::pair{"tgt.model", &tgt_model_}}) {
      *path = (fs::path(private_dir_) / name).string();
      bytes[k] = sync.set_and_wait(std::string("tokenizer/") + name, "");
      write_file_atomic(*path, bytes[k++]);
    }
    // The corpus in this host's data.prepared_dir, with rank 0's tokenizers:
    // found ready when this host shares rank 0's disk, else encoded here.
    data::PrepareOptions opts;
    opts.src_model = &bytes[0], opts.tgt_model = &bytes[1];
    opts.threads = static_cast<int>(cfg.train.threads);
    const data::PrepareReport prepared = data::prepare_corpus(cfg, opts);
    corpus_dir_ = prepared.dir;
    corpus_ratio_ = prepared.target_source_ratio;
    return;
  }
  // Checkpoints copy the tokenizer models from here: a stable place of the
  // run's own, since last/ itself is replaced by every save.
  const fs::path tok_dir = fs::path(run_dir_) / "tokenizer";
  std::error_code ec;
  made_tokenizer_dir_ = !fs::exists(tok_dir, ec);
  fs::create_directories(tok_dir);
  src_model_ = (tok_dir / "src.model").string();
  tgt_model_ = (tok_dir / "tgt.model").string();
  data::PrepareOptions opts;
  opts.threads = static_cast<int>(cfg.train.threads);
  if (!resume.empty()) {
    // A resumed run uses the tokenizers stored with its checkpoint, and a
    // corpus encoded with them.
    write_file_atomic(src_model_, resumed_.at("src.model"));
    write_file_atomic(tgt_model_, resumed_.at("tgt.model"));
    opts.src_model = &resumed_.at("src.model");
    opts.tgt_model = &resumed_.at("tgt.model");
  } else {
    if (!init_from_.dir.empty()) {
      // Fine-tuning: the corpus is encoded with the tokenizers of the
      // checkpoint started from, never trained anew.
      opts.src_model = &init_from_.at("src.model");
      opts.tgt_model = &init_from_.at("tgt.model");
    }
  }
  const data::PrepareReport prepared = data::prepare_corpus(cfg, opts);
  corpus_dir_ = prepared.dir;
  corpus_ratio_ = prepared.target_source_ratio;
  if (resume.empty())
    for (const auto& [path, to] : {std::pair{prepared.src_model, src_model_}, std::pair{prepared.tgt_model, tgt_model_}})
      write_file_atomic(to, read_file(path, "tokenizer model"));
  if (sync.world_size() > 1) {
    sync.set_and_wait("tokenizer/src.model", read_file(src_model_));
    sync.set_and_wait("tokenizer/tgt.model", read_file(tgt_model_));
  }
}

CheckpointManager::~CheckpointManager() {
  std::error_code ec;
  if (!private_dir_.empty()) remove_tree(private_dir_, ec);
  if (lock_) remove_unsaved_run();
}

void CheckpointManager::remove_unsaved_run() noexcept {
  try {
    if (!checkpoints_in(run_dir_).empty()) return;
    const fs::path run(run_dir_);
    std::error_code ec;
    if (made_tokenizer_dir_)
      remove_owned_tree((run / "tokenizer").string(),
                        [](const std::string& name) { return name == "src.model" || name == "tgt.model"; },
                        "the run's tokenizer copies");
    if (!made_run_dir_) return;
    // Only the default metrics file: one train.metrics_file names elsewhere is the user's to keep.
    if (cfg_.train.metrics_file.empty()) fs::remove(run / "metrics.jsonl", ec);
    // The lock file goes while it is still held: a trainer started in the
    // meantime found it locked and was refused; one started afterwards makes
    // the folder anew.
    fs::remove(run / kRunLockFile, ec);
    if (fs::is_empty(run, ec)) fs::remove(run, ec);
    if (fs::exists(run, ec))
      spdlog::warn("train: no checkpoint was saved; {} keeps what this run did not make there", run_dir_);
    else
      spdlog::info("train: no checkpoint was saved; {} removed (this run had made it)", run_dir_);
  } catch (const std::exception& e) {
    spdlog::warn("train: {} could not be tidied after a run with no checkpoint: {}", run_dir_, e.what());
  }
}

std::string CheckpointManager::resumed_precision() const {
  if (resume_from_.empty() || resumed_.bytes.count("state.yaml") == 0) return "";
  return parse_training_state(resumed_.at("state.yaml"), resumed_.path("state.yaml")).precision;
}

TrainingState CheckpointManager::restore(Transformer& model, ops::FlatAdam& optimizer) {
  if (resume_from_.empty() && !init_from_.dir.empty()) {
    load_init_weights(init_from_, model);
    spdlog::info("train: starting from the weights and tokenizers of {}; fresh optimizer and schedule",
                 init_from_.dir);
    init_from_ = {};
    return {};
  }
  if (resume_from_.empty()) return {};
  if (sync_.rank() != 0)
    return parse_training_state(sync_.set_and_wait("state", ""), "rank 0's training state");
  LoadedCheckpoint ck = load_checkpoint(resumed_, torch::kCPU);
  resumed_ = {};  // the bytes are in the model and optimizer now
  {
    torch::NoGradGuard no_grad;
    const auto saved = ck.model->named_parameters();
    for (auto& p : model->named_parameters()) p.value().copy_(saved[p.key()]);
  }
  // A checkpoint saved with an average holds it as its model weights and
  // the raw ones with the optimizer state, which puts them back: the
  // average goes on from the former, training from the latter. Without an
  // average saved, both start from the model weights.
  optimizer.reset_ema();
  load_optimizer(ck, optimizer);
  spdlog::info("train: resuming {} at step {} (epoch {}, batch {})", resume_from_, ck.state.step,
               ck.state.position.epoch + 1, ck.state.position.batch);
  if (sync_.world_size() > 1) sync_.set_and_wait("state", training_state_yaml(ck.state));
  return ck.state;
}

void CheckpointManager::save(Transformer& model, const ops::FlatAdam& optimizer,
                             const TrainingState& state, bool best) const {
  if (sync_.rank() != 0) return;
  const fs::path run(run_dir_);
  save_checkpoint((run / "last").string(), model, &optimizer, state, cfg_, src_model_, tgt_model_);
  if (best)
    save_checkpoint((run / "best").string(), model, &optimizer, state, cfg_, src_model_, tgt_model_);
  if (cfg_.train.keep_last > 0) keep(model, state);
}

void CheckpointManager::keep(Transformer& model, const TrainingState& state) const {
  const fs::path run(run_dir_);
  // Weights, config and tokenizers: enough to translate or average, a third
  // of last/'s size (resume from last/).
  const std::string name = kept_checkpoint_name(state.step);
  save_checkpoint((run / name).string(), model, nullptr, state, cfg_, src_model_, tgt_model_);
  // The others, oldest (lowest step) first; the one just saved always stays
  // (a run resumed from an earlier step may find later ones of its own).
  // Only checkpoints go, only in this run's folder (which this trainer holds
  // the lock of): a folder holding anything else is neither counted nor
  // touched, and is said.
  std::vector<std::string> ours;
  for (const std::string& kept : kept_checkpoints_in(run_dir_)) {
    if (kept == name) continue;
    std::string foreign;
    for (const char* suffix : {"", ".tmp", ".old"})
      if (foreign.empty()) foreign = first_foreign_entry((run / kept).string() + suffix, is_checkpoint_file_name);
    if (foreign.empty()) ours.push_back(kept);
    else spdlog::warn("train.keep_last: {}/ left as it is: {} was not written by nmt", kept, foreign);
  }
  const size_t room = static_cast<size_t>(cfg_.train.keep_last) - 1;
  const size_t excess = ours.size() > room ? ours.size() - room : 0;
  for (size_t i = 0; i < excess; ++i)
    for (const char* suffix : {"", ".tmp", ".old"})
      remove_owned_tree((run / ours[i]).string() + suffix, is_checkpoint_file_name,
                        "a checkpoint kept by train.keep_last");
  if (excess > 0) sync_directory(run_dir_);
}

}  // namespace nmt
