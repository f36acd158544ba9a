#include "train/init_from.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/StringUtil.h>

#include "checkpoint/checkpoint.h"
#include "util/errors.h"

namespace nmt {

namespace {

// Keys a checkpoint's weights and tokenizers do not depend on: a fine-tuning
// run may change them.
bool free_to_change(const std::string& key, const Config& cfg, const Config& saved) {
  if (key == "model.max_positions" || key == "tokenizer.sample_lines") return true;
  // Dropout applies to activations only (model.dropout, and any rate added beside it).
  if (key.rfind("model.", 0) == 0 && key.find("dropout") != std::string::npos) return true;
  // One shared vocabulary is tokenizer.src_vocab_size's; the target size is ignored then.
  return key == "tokenizer.tgt_vocab_size" && cfg.tokenizer.shared && saved.tokenizer.shared;
}

}  // namespace

void check_init_compatible(const Config& cfg, const Config& saved, const std::string& dir) {
  for (const char* section : {"model", "tokenizer"})
    for (const std::string& key : config_keys(section)) {
      if (free_to_change(key, cfg, saved)) continue;
      const std::string ours = config_value(cfg, key), theirs = config_value(saved, key);
      if (ours == theirs) continue;
      const auto origin = cfg.origin.find(key);
      throw InputError((origin != cfg.origin.end() ? origin->second : cfg.source_name) + ": " + key + ": " + ours +
                       " in the config, " + theirs + " in " + dir + " (train.init_from starts from its weights " +
                       "and tokenizers: the model and tokenizer settings must be the same)");
    }
}

CheckpointFiles read_init_checkpoint(const Config& cfg) {
  CheckpointFiles files;
  try {
    files = read_checkpoint(cfg.train.init_from, CheckpointUse::kUse, checkpoint_files(CheckpointUse::kUse));
  } catch (const InputError& e) {
    throw InputError(std::string("train.init_from: ") + e.what());
  }
  const Config saved = parse_config(files.at("config.yaml"), files.path("config.yaml"));
  check_init_compatible(cfg, saved, files.dir);
  return files;
}

void load_init_weights(const CheckpointFiles& files, Transformer& model) {
  const LoadedCheckpoint ck = load_checkpoint(files, at::kCPU);
  const auto saved = ck.model->named_parameters();
  at::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) {
    const at::Tensor* from = saved.find(p.key());
    if (from == nullptr || !from->sizes().equals(p.value().sizes()))
      throw InputError(files.path("model.pt") + ": parameter " + p.key() +
                       (from ? " has shape " + c10::str(from->sizes()) : std::string(" is missing")) +
                       "; the run's model expects " + c10::str(p.value().sizes()) + " (train.init_from)");
    p.value().copy_(*from);
  }
}

}  // namespace nmt
