#include "train/checkpoint_writer.h"

#include <torch/serialize.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/manifest.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/test_hooks.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// Test hooks, just before the swap: NMT_TEST_SAVE_DELAY_MS pauses every
// save, widening the window a SIGKILL can hit (the crash tests); the holds
// (util/test_hooks.h) let a test look at a folder mid-save for as long as
// it needs.
void test_save_delay(const fs::path& dir) {
  static const long ms = [] {
    const char* v = std::getenv("NMT_TEST_SAVE_DELAY_MS");
    return v ? std::atol(v) : 0L;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  test_hold("save", /*until_signal=*/false);
  if (fs::exists(dir)) test_hold("save-replace", /*until_signal=*/false);
}

}  // namespace

void save_checkpoint(const std::string& dir, Transformer& model,
                     const ops::FlatAdam* optimizer, const TrainingState& state,
                     const Config& cfg, const std::string& src_model,
                     const std::string& tgt_model) {
  const std::string src = read_file(src_model), tgt = read_file(tgt_model);
  save_checkpoint(dir, model, optimizer, state, cfg, TokenizerBytes{src, tgt});
}

void save_checkpoint(const std::string& dir, Transformer& model, const ops::FlatAdam* optimizer,
                     const TrainingState& state, const Config& cfg, const TokenizerBytes& tokenizers) {
  const fs::path staged = dir + ".tmp";
  std::error_code ec;
  // An earlier save that did not finish; a folder of someone else's stops the save.
  remove_owned_tree(staged.string(), is_checkpoint_file_name, "a checkpoint being saved");
  fs::create_directories(staged, ec);
  if (ec) throw IoError(staged.string() + ": cannot create: " + ec.message());
  std::vector<std::string> files{"model.pt", "model.safetensors", "state.yaml", "config.yaml", "src.model",
                                 "tgt.model"};
  try {
    {
      AtomicFile weights((staged / "model.pt").string());
      torch::save(model, weights.temp_path());
      weights.commit();
    }
    // The same weights for the runtime, which reads them without LibTorch.
    write_file_atomic((staged / "model.safetensors").string(), model_safetensors(model));
    if (optimizer) {
      AtomicFile moments((staged / "optimizer.pt").string());
      optimizer->save(moments.temp_path());
      moments.commit();
      files.push_back("optimizer.pt");
    }
    write_file_atomic((staged / "state.yaml").string(), training_state_yaml(state));
    write_file_atomic((staged / "config.yaml").string(), to_yaml(cfg));
    write_file_atomic((staged / "src.model").string(), tokenizers.src_model);
    write_file_atomic((staged / "tgt.model").string(), tokenizers.tgt_model);
    write_manifest(staged.string(), files);
  } catch (...) {
    remove_tree(staged, ec);  // a failed save leaves only the previous checkpoint behind
    throw;
  }
  test_save_delay(dir);
  // The folder replaced is the previous checkpoint, deleted after the swap.
  if (const std::string foreign = first_foreign_entry(dir, is_checkpoint_file_name); !foreign.empty()) {
    remove_tree(staged, ec);
    throw InputError(foreign + ": not written by nmt (" + dir + " should hold a checkpoint); " + dir +
                     " left as it is: move it away or train into another folder");
  }
  replace_directory(staged.string(), dir);
}

std::string recover_checkpoints(const std::string& dir) {
  std::string done;
  std::vector<fs::path> folders{fs::path(dir), fs::path(dir) / "best", fs::path(dir) / "last"};
  for (const std::string& kept : kept_checkpoints_in(dir)) folders.push_back(fs::path(dir) / kept);
  for (const fs::path& d : folders) {
    if (!fs::exists(d) && !fs::exists(d.string() + ".tmp") && !fs::exists(d.string() + ".old")) continue;
    const std::string line =
        recover_directory(d.string(), d.string() + ".tmp", checkpoint_complete, is_checkpoint_file_name);
    if (!line.empty()) done += (done.empty() ? "" : "; ") + line;
  }
  if (!done.empty()) spdlog::warn("checkpoint: {}", done);
  return done;
}

bool add_model_safetensors(const std::string& dir) {
  // Everything verified against the manifest, model.safetensors too where it is listed.
  const CheckpointFiles files =
      read_checkpoint(dir, CheckpointUse::kUse, checkpoint_files(CheckpointUse::kUse), {"model.safetensors"});
  const std::vector<ManifestEntry> entries = parse_manifest(files.at(kManifestFile), files.path(kManifestFile));
  std::vector<std::string> listed;
  for (const ManifestEntry& e : entries) {
    if (e.file == "model.safetensors") return false;
    listed.push_back(e.file);
  }
  const LoadedCheckpoint ck = load_checkpoint(files, c10::Device(c10::kCPU));
  write_file_atomic(files.path("model.safetensors"), model_safetensors(ck.model));
  listed.push_back("model.safetensors");
  write_manifest(files.dir, listed);
  return true;
}

}  // namespace nmt
