#include "checkpoint/checkpoint.h"

#include <torch/serialize.h>
#include <yaml-cpp/yaml.h>

#include <spdlog/spdlog.h>

#include <filesystem>

#include "checkpoint/manifest.h"
#include "model/build.h"
#include "model/parameter_table.h"
#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

std::vector<std::string> checkpoint_files(CheckpointUse use) {
  std::vector<std::string> names{"model.pt", "config.yaml", "state.yaml", "src.model", "tgt.model"};
  if (use == CheckpointUse::kResume) names.push_back("optimizer.pt");
  return names;
}

LoadedCheckpoint load_checkpoint(const std::string& dir, const c10::Device& device, CheckpointUse use) {
  const CheckpointFiles files = read_checkpoint(dir, use, checkpoint_files(use));
  if (!files.note.empty()) spdlog::warn("checkpoint: {}", files.note);
  return load_checkpoint(files, device);
}

LoadedCheckpoint load_checkpoint(const CheckpointFiles& files, const c10::Device& device) {
  LoadedCheckpoint ck;
  ck.dir = files.dir;
  ck.cfg = parse_config(files.at("config.yaml"), files.path("config.yaml"));
  ck.state = parse_training_state(files.at("state.yaml"), files.path("state.yaml"));
  ck.src_tok = std::make_unique<Tokenizer>(Tokenizer::from_bytes(files.at("src.model"), files.path("src.model")));
  ck.tgt_tok = std::make_unique<Tokenizer>(Tokenizer::from_bytes(files.at("tgt.model"), files.path("tgt.model")));
  ck.src_model = files.at("src.model");
  ck.tgt_model = files.at("tgt.model");
  ck.model = build_model(ck.cfg, ck.src_tok->vocab_size(), ck.tgt_tok->vocab_size());
  // torch::load resizes parameters silently; a checkpoint whose weights do not
  // fit its own config and tokenizers is corrupt, not something to run.
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  for (const ParamEntry& e : parameter_table(*ck.model)) expected.emplace_back(e.name, e.tensor.sizes().vec());
  const std::string& weights = files.at("model.pt");
  try {
    torch::load(ck.model, weights.data(), weights.size());
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw InputError(files.path("model.pt") + ": cannot load weights: " + msg.substr(0, msg.find('\n')));
  }
  const std::vector<ParamEntry> loaded = parameter_table(*ck.model);
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, shape] = expected[i];
    if (loaded[i].tensor.sizes().vec() != shape)
      throw InputError(files.path("model.pt") + ": parameter " + name + " has shape " +
                       c10::str(loaded[i].tensor.sizes()) + ", config expects " + c10::str(c10::IntArrayRef(shape)));
  }
  if (files.bytes.count("optimizer.pt")) ck.optimizer_state = files.at("optimizer.pt");
  ck.model->to(device);
  ck.model->eval();
  return ck;
}

void load_optimizer(const LoadedCheckpoint& ck, ops::FlatAdam& optimizer) {
  if (ck.optimizer_state.empty()) throw InputError(ck.dir + "/optimizer.pt: missing from checkpoint");
  optimizer.load_bytes(ck.optimizer_state, ck.dir + "/optimizer.pt");
}

}  // namespace nmt
