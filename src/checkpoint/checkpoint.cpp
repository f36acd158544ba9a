#include "checkpoint/checkpoint.h"

#include <torch/serialize.h>
#include <yaml-cpp/yaml.h>

#include <spdlog/spdlog.h>

#include <filesystem>

#include "checkpoint/manifest.h"
#include "model/build.h"
#include "model/parameter_table.h"
#include "runtime/safetensors.h"
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
  load_model_weights(ck.model, files.at("model.pt"), files.path("model.pt"));
  if (files.bytes.count("optimizer.pt")) ck.optimizer_state = files.at("optimizer.pt");
  ck.model->to(device);
  ck.model->eval();
  return ck;
}

void load_model_weights(Transformer& model, const std::string& bytes, const std::string& path) {
  // torch::load resizes parameters silently; a checkpoint whose weights do not
  // fit its own config and tokenizers is corrupt, not something to run.
  const std::vector<WeightSpec> expected = weight_specs(model_shape(*model));
  try {
    torch::load(model, bytes.data(), bytes.size());
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw InputError(path + ": cannot load weights: " + msg.substr(0, msg.find('\n')));
  }
  const std::vector<ParamEntry> loaded = parameter_table(*model);
  for (size_t i = 0; i < expected.size(); ++i)
    if (loaded[i].tensor.sizes().vec() != expected[i].shape)
      throw InputError(path + ": parameter " + expected[i].name + " has shape " + c10::str(loaded[i].tensor.sizes()) +
                       ", config expects " + c10::str(c10::IntArrayRef(expected[i].shape)));
}

std::string model_safetensors(const Transformer& model) {
  std::vector<at::Tensor> kept;  // float32 CPU copies where the parameters are not (a GPU, bf16)
  std::map<std::string, runtime::TensorView> views;
  const auto add = [&](const std::string& name, const at::Tensor& t) {
    kept.push_back(t.detach().to(at::kCPU, at::kFloat).contiguous());
    views.emplace(name, runtime::TensorView{kept.back().sizes().vec(), kept.back().data_ptr<float>()});
  };
  for (const ParamEntry& e : parameter_table(*model)) add(e.name, e.tensor);
  const auto buffers = model->named_buffers();
  add(kPositionsName, *buffers.find(kPositionsName));
  return runtime::write_safetensors(views, {{"format", "nmt"}, {"written_by", "nmt checkpoint"}});
}

void load_optimizer(const LoadedCheckpoint& ck, ops::FlatAdam& optimizer) {
  if (ck.optimizer_state.empty()) throw InputError(ck.dir + "/optimizer.pt: missing from checkpoint");
  optimizer.load_bytes(ck.optimizer_state, ck.dir + "/optimizer.pt");
}

}  // namespace nmt
