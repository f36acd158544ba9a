#include "checkpoint/checkpoint.h"

#include <torch/serialize.h>
#include <yaml-cpp/yaml.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "checkpoint/manifest.h"
#include "model/build.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// Test hook for the crash tests: NMT_TEST_SAVE_DELAY_MS pauses a save just
// before the swap, widening the window a SIGKILL can hit.
void test_save_delay() {
  static const long ms = [] {
    const char* v = std::getenv("NMT_TEST_SAVE_DELAY_MS");
    return v ? std::atol(v) : 0L;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

void save_checkpoint(const std::string& dir, Transformer& model,
                     const ops::FlatAdam* optimizer, const TrainingState& state,
                     const Config& cfg, const std::string& src_model,
                     const std::string& tgt_model) {
  const fs::path staged = dir + ".tmp";
  std::error_code ec;
  fs::remove_all(staged, ec);  // an earlier save that did not finish
  fs::create_directories(staged, ec);
  if (ec) throw IoError(staged.string() + ": cannot create: " + ec.message());
  std::vector<std::string> files{"model.pt", "state.yaml", "config.yaml", "src.model", "tgt.model"};
  try {
    {
      AtomicFile weights((staged / "model.pt").string());
      torch::save(model, weights.temp_path());
      weights.commit();
    }
    if (optimizer) {
      AtomicFile moments((staged / "optimizer.pt").string());
      optimizer->save(moments.temp_path());
      moments.commit();
      files.push_back("optimizer.pt");
    }
    write_file_atomic((staged / "state.yaml").string(), training_state_yaml(state));
    write_file_atomic((staged / "config.yaml").string(), to_yaml(cfg));
    write_file_atomic((staged / "src.model").string(), read_file(src_model));
    write_file_atomic((staged / "tgt.model").string(), read_file(tgt_model));
    write_manifest(staged.string(), files);
  } catch (...) {
    fs::remove_all(staged, ec);  // a failed save leaves only the previous checkpoint behind
    throw;
  }
  test_save_delay();
  replace_directory(staged.string(), dir);
}

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
  ck.model = build_model(ck.cfg, ck.src_tok->vocab_size(), ck.tgt_tok->vocab_size());
  // torch::load resizes parameters silently; a checkpoint whose weights do not
  // fit its own config and tokenizers is corrupt, not something to run.
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  for (const auto& p : ck.model->named_parameters())
    expected.emplace_back(p.key(), p.value().sizes().vec());
  const std::string& weights = files.at("model.pt");
  try {
    torch::load(ck.model, weights.data(), weights.size());
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw InputError(files.path("model.pt") + ": cannot load weights: " + msg.substr(0, msg.find('\n')));
  }
  const auto params = ck.model->named_parameters();
  for (const auto& [name, shape] : expected) {
    const auto found = params.find(name);
    if (!found || found->sizes().vec() != shape)
      throw InputError(files.path("model.pt") + ": parameter " + name + " has shape " +
                       (found ? c10::str(found->sizes()) : "(missing)") + ", config expects " +
                       c10::str(c10::IntArrayRef(shape)));
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

std::string recover_checkpoints(const std::string& dir) {
  std::string done;
  for (const fs::path& d : {fs::path(dir), fs::path(dir) / "best", fs::path(dir) / "last"}) {
    if (!fs::exists(d) && !fs::exists(d.string() + ".tmp") && !fs::exists(d.string() + ".old")) continue;
    const std::string line = recover_directory(d.string(), d.string() + ".tmp", checkpoint_complete);
    if (!line.empty()) done += (done.empty() ? "" : "; ") + line;
  }
  if (!done.empty()) spdlog::warn("checkpoint: {}", done);
  return done;
}

}  // namespace nmt
