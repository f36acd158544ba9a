#include "train/checkpoint_manager.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <filesystem>
#include "data/text_io.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"

namespace nmt {

namespace fs = std::filesystem;

std::string resume_checkpoint(const std::string& dir) {
  const fs::path last = fs::path(dir) / "last";
  return fs::exists(last / "model.pt") ? last.string() : resolve_checkpoint_dir(dir);
}

Config resume_config(const std::string& dir) {
  return load_config((fs::path(resume_checkpoint(dir)) / "config.yaml").string());
}

namespace {

}  // namespace

CheckpointManager::CheckpointManager(const Config& cfg, const std::string& resume,
                                     GradientSync& sync)
    : cfg_(cfg), sync_(sync), run_dir_(cfg.train.checkpoint_dir) {
  if (!resume.empty()) resume_from_ = sync.rank() == 0 ? resume_checkpoint(resume) : resume;
  if (sync.rank() != 0) {
    // Rank 0's tokenizer models, whether or not this host shares its disk.
    private_dir_ = (fs::temp_directory_path() /
                    ("nmt-rank" + std::to_string(sync.rank()) + "-" + std::to_string(::getpid())))
                       .string();
    fs::create_directories(private_dir_);
    for (const auto& [name, path] : {std::pair{"src.model", &src_model_}, std::pair{"tgt.model", &tgt_model_}}) {
      *path = (fs::path(private_dir_) / name).string();
      write_file_atomic(*path, sync.set_and_wait(std::string("tokenizer/") + name, ""));
    }
    return;
  }
  // A resumed run uses the tokenizers stored with its checkpoint.
  TokenizerPaths from;
  if (!resume.empty()) {
    from = {(fs::path(resume_from_) / "src.model").string(),
            (fs::path(resume_from_) / "tgt.model").string()};
  } else {
    // The corpus is checked before minutes go into training tokenizers on it.
    check_parallel_text(cfg.data.train_src, cfg.data.train_tgt);
    check_parallel_text(cfg.data.valid_src, cfg.data.valid_tgt);
    from = prepare_tokenizers(cfg.tokenizer, cfg.data.train_src, cfg.data.train_tgt);
  }
  // Checkpoints copy the tokenizer models from here: a stable place of the
  // run's own, since last/ itself is replaced by every save.
  const fs::path tok_dir = fs::path(run_dir_) / "tokenizer";
  fs::create_directories(tok_dir);
  for (const auto& [path, name] : {std::pair{from.src_model, "src.model"},
                                   std::pair{from.tgt_model, "tgt.model"}}) {
    const fs::path to = tok_dir / name;
    if (!fs::exists(to) || !fs::equivalent(path, to))
      fs::copy_file(path, to, fs::copy_options::overwrite_existing);
  }
  src_model_ = (tok_dir / "src.model").string();
  tgt_model_ = (tok_dir / "tgt.model").string();
  if (sync.world_size() > 1) {
    sync.set_and_wait("tokenizer/src.model", read_file(src_model_));
    sync.set_and_wait("tokenizer/tgt.model", read_file(tgt_model_));
  }
}

CheckpointManager::~CheckpointManager() {
  std::error_code ec;
  if (!private_dir_.empty()) fs::remove_all(private_dir_, ec);
}

TrainingState CheckpointManager::restore(Transformer& model, ops::FlatAdam& optimizer) const {
  if (resume_from_.empty()) return {};
  if (sync_.rank() != 0)
    return parse_training_state(sync_.set_and_wait("state", ""), "rank 0's training state");
  LoadedCheckpoint ck = load_checkpoint(resume_from_, torch::kCPU);
  {
    torch::NoGradGuard no_grad;
    const auto saved = ck.model->named_parameters();
    for (auto& p : model->named_parameters()) p.value().copy_(saved[p.key()]);
  }
  load_optimizer(resume_from_, optimizer);
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
}

}  // namespace nmt
