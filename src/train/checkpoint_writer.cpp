#include "train/checkpoint_writer.h"

#include <torch/serialize.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "checkpoint/manifest.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// Test hooks, both just before the swap:
// - NMT_TEST_SAVE_DELAY_MS pauses every save, widening the window a SIGKILL
//   can hit (the crash tests).
// - NMT_TEST_SAVE_HOLD_FILE=PATH holds a save that replaces a checkpoint
//   already in place for as long as PATH exists, so a test can look at a
//   folder mid-save for as long as its readers take; a fixed delay races a
//   loaded machine.
void test_save_delay(const fs::path& dir) {
  static const long ms = [] {
    const char* v = std::getenv("NMT_TEST_SAVE_DELAY_MS");
    return v ? std::atol(v) : 0L;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  static const char* hold = std::getenv("NMT_TEST_SAVE_HOLD_FILE");
  if (hold && *hold && fs::exists(dir))
    while (fs::exists(hold)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace

void save_checkpoint(const std::string& dir, Transformer& model,
                     const ops::FlatAdam* optimizer, const TrainingState& state,
                     const Config& cfg, const std::string& src_model,
                     const std::string& tgt_model) {
  const fs::path staged = dir + ".tmp";
  std::error_code ec;
  remove_tree(staged, ec);  // an earlier save that did not finish
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
    remove_tree(staged, ec);  // a failed save leaves only the previous checkpoint behind
    throw;
  }
  test_save_delay(dir);
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

}  // namespace nmt
