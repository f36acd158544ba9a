#include "train/checkpoint_manager.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "tokenizer/tokenizer.h"

namespace nmt {

namespace fs = std::filesystem;

std::string resume_checkpoint(const std::string& dir) {
  const fs::path last = fs::path(dir) / "last";
  return fs::exists(last / "model.pt") ? last.string() : resolve_checkpoint_dir(dir);
}

Config resume_config(const std::string& dir) {
  return load_config((fs::path(resume_checkpoint(dir)) / "config.yaml").string());
}

CheckpointManager::CheckpointManager(const Config& cfg, const std::string& resume)
    : cfg_(cfg), run_dir_(cfg.train.checkpoint_dir) {
  // A resumed run uses the tokenizers stored with its checkpoint.
  TokenizerPaths from;
  if (!resume.empty()) {
    resume_from_ = resume_checkpoint(resume);
    from = {(fs::path(resume_from_) / "src.model").string(),
            (fs::path(resume_from_) / "tgt.model").string()};
  } else {
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
}

TrainingState CheckpointManager::restore(Transformer& model, ops::FlatAdam& optimizer) const {
  if (resume_from_.empty()) return {};
  LoadedCheckpoint ck = load_checkpoint(resume_from_, torch::kCPU);
  {
    torch::NoGradGuard no_grad;
    const auto saved = ck.model->named_parameters();
    for (auto& p : model->named_parameters()) p.value().copy_(saved[p.key()]);
  }
  load_optimizer(resume_from_, optimizer);
  spdlog::info("train: resuming {} at step {} (epoch {}, batch {})", resume_from_, ck.state.step,
               ck.state.position.epoch + 1, ck.state.position.batch);
  return ck.state;
}

void CheckpointManager::save(Transformer& model, const ops::FlatAdam& optimizer,
                             const TrainingState& state, bool best) const {
  const fs::path run(run_dir_);
  save_checkpoint((run / "last").string(), model, &optimizer, state, cfg_, src_model_, tgt_model_);
  if (best)
    save_checkpoint((run / "best").string(), model, &optimizer, state, cfg_, src_model_, tgt_model_);
}

}  // namespace nmt
