#include "checkpoint/checkpoint.h"

#include <torch/serialize.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/build.h"
#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

std::string state_yaml(const TrainingState& s) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << YAML::BeginMap << YAML::Key << "step" << YAML::Value << s.step;
  out << YAML::Key << "epoch" << YAML::Value << s.position.epoch;
  out << YAML::Key << "batch_in_epoch" << YAML::Value << s.position.batch;
  out << YAML::Key << "best" << YAML::Value << s.best;
  out << YAML::Key << "evals_since_best" << YAML::Value << s.evals_since_best;
  out << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, value] : s.metrics) out << YAML::Key << name << YAML::Value << value;
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

TrainingState read_state(const std::string& path) {
  TrainingState s;
  try {
    const YAML::Node n = YAML::LoadFile(path);
    s.step = n["step"].as<int64_t>();
    s.position.epoch = n["epoch"].as<int64_t>();
    s.position.batch = n["batch_in_epoch"].as<int64_t>();
    s.best = n["best"].as<double>();
    s.evals_since_best = n["evals_since_best"].as<int64_t>();
    for (const auto& kv : n["metrics"]) s.metrics[kv.first.as<std::string>()] = kv.second.as<double>();
    if (s.step < 0 || s.position.epoch < 0 || s.position.batch < 0 || s.evals_since_best < 0)
      throw YAML::Exception(YAML::Mark::null_mark(), "negative counter");
  } catch (const YAML::Exception& e) {
    throw InputError(path + ": unreadable training state: " + e.msg);
  }
  return s;
}

void require_file(const fs::path& p) {
  if (!fs::is_regular_file(p)) throw InputError(p.string() + ": missing from checkpoint");
}

}  // namespace

void save_checkpoint(const std::string& dir, Transformer& model,
                     const ops::FlatAdam* optimizer, const TrainingState& state,
                     const Config& cfg, const std::string& src_model,
                     const std::string& tgt_model) {
  const fs::path final_dir(dir);
  const fs::path tmp = final_dir.string() + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  torch::save(model, (tmp / "model.pt").string());
  if (optimizer) optimizer->save((tmp / "optimizer.pt").string());
  std::ofstream(tmp / "state.yaml") << state_yaml(state);
  std::ofstream(tmp / "config.yaml") << to_yaml(cfg);
  fs::copy_file(src_model, tmp / "src.model");
  fs::copy_file(tgt_model, tmp / "tgt.model");
  // Swap in: the old folder is only removed once the new one is complete.
  const fs::path old = final_dir.string() + ".old";
  fs::remove_all(old);
  if (fs::exists(final_dir)) fs::rename(final_dir, old);
  fs::rename(tmp, final_dir);
  fs::remove_all(old);
}

std::string resolve_checkpoint_dir(const std::string& dir) {
  const fs::path d(dir);
  if (!fs::is_directory(d)) throw InputError(dir + ": no such checkpoint folder");
  if (fs::exists(d / "model.pt")) return d.string();
  for (const char* sub : {"best", "last"})
    if (fs::exists(d / sub / "model.pt")) return (d / sub).string();
  throw InputError(dir + ": not a checkpoint (no model.pt, best/ or last/)");
}

LoadedCheckpoint load_checkpoint(const std::string& dir_in, const c10::Device& device) {
  LoadedCheckpoint ck;
  ck.dir = resolve_checkpoint_dir(dir_in);
  const fs::path d(ck.dir);
  for (const char* f : {"model.pt", "config.yaml", "state.yaml", "src.model", "tgt.model"})
    require_file(d / f);
  ck.cfg = load_config((d / "config.yaml").string());
  ck.state = read_state((d / "state.yaml").string());
  ck.src_tok = std::make_unique<Tokenizer>((d / "src.model").string());
  ck.tgt_tok = std::make_unique<Tokenizer>((d / "tgt.model").string());
  ck.model = build_model(ck.cfg, ck.src_tok->vocab_size(), ck.tgt_tok->vocab_size());
  // torch::load resizes parameters silently; a checkpoint whose weights do not
  // fit its own config and tokenizers is corrupt, not something to run.
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  for (const auto& p : ck.model->named_parameters())
    expected.emplace_back(p.key(), p.value().sizes().vec());
  try {
    torch::load(ck.model, (d / "model.pt").string());
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw InputError((d / "model.pt").string() + ": cannot load weights: " +
                     msg.substr(0, msg.find('\n')));
  }
  const auto params = ck.model->named_parameters();
  for (const auto& [name, shape] : expected) {
    const auto found = params.find(name);
    if (!found || found->sizes().vec() != shape)
      throw InputError((d / "model.pt").string() + ": parameter " + name + " has shape " +
                       (found ? c10::str(found->sizes()) : "(missing)") + ", config expects " +
                       c10::str(c10::IntArrayRef(shape)));
  }
  ck.model->to(device);
  ck.model->eval();
  return ck;
}

void load_optimizer(const std::string& dir, ops::FlatAdam& optimizer) {
  const fs::path p = fs::path(dir) / "optimizer.pt";
  require_file(p);
  optimizer.load(p.string());
}

}  // namespace nmt
