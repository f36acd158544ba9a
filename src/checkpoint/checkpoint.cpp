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

void require_file(const fs::path& p) {
  if (!fs::is_regular_file(p)) throw InputError(p.string() + ": missing from checkpoint");
}

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

std::string resolve_checkpoint_dir(const std::string& dir) {
  recover_checkpoints(dir);
  const fs::path d(dir);
  if (!fs::is_directory(d)) throw InputError(dir + ": no such checkpoint folder");
  if (fs::exists(d / kManifestFile) || fs::exists(d / "model.pt")) return d.string();
  for (const char* sub : {"best", "last"})
    if (fs::exists(d / sub / kManifestFile)) return (d / sub).string();
  throw InputError(dir + ": not a checkpoint (no manifest.txt, best/ or last/)");
}

LoadedCheckpoint load_checkpoint(const std::string& dir_in, const c10::Device& device) {
  LoadedCheckpoint ck;
  ck.dir = resolve_checkpoint_dir(dir_in);
  const fs::path d(ck.dir);
  verify_manifest(ck.dir);
  for (const char* f : {"model.pt", "config.yaml", "state.yaml", "src.model", "tgt.model"})
    require_file(d / f);
  ck.cfg = load_config((d / "config.yaml").string());
  ck.state = parse_training_state(read_file((d / "state.yaml").string(), "training state"), (d / "state.yaml").string());
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
