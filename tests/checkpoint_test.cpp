// Checkpoints (checkpoint/): save and load, the manifest and the training
// state they carry; folders shared between one writer and any number of
// readers: reads that never mix two saves and never change the folder, the
// rules for which folder a command means, and the one-writer lock.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <torch/cuda.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/manifest.h"
#include "checkpoint/run_lock.h"
#include "checkpoint/state.h"
#include "nmt/translator.h"
#include "runtime/translator_impl.h"
#include "support/runtime_models.h"
#include "model/build.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint_writer.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/errors.h"

namespace nmt {
namespace {

namespace fs = std::filesystem;

TEST(Checkpoint, SaveLoadGivesIdenticalOutputs) {
  const auto& paths = testing::toy_tokenizers();
  const Tokenizer zh(paths.src_model), en(paths.tgt_model);
  Config cfg = testing::tiny_config();
  torch::manual_seed(1);
  Transformer m = build_model(cfg, zh.vocab_size(), en.vocab_size());
  m->eval();
  const std::string dir = testing::temp_dir("ckpt") + "/last";
  TrainingState st;
  st.step = 7;
  save_checkpoint(dir, m, nullptr, st, cfg, paths.src_model, paths.tgt_model);
  LoadedCheckpoint ck = load_checkpoint(dir, torch::kCPU);
  EXPECT_EQ(ck.state.step, 7);
  EXPECT_EQ(to_yaml(ck.cfg), to_yaml(cfg));
  const auto src = torch::randint(4, zh.vocab_size(), {2, 6}, torch::kLong);
  const auto tgt = torch::randint(4, en.vocab_size(), {2, 5}, torch::kLong);
  const auto sl = torch::tensor({6, 3}, torch::kLong), tl = torch::tensor({5, 4}, torch::kLong);
  EXPECT_TRUE(m(src, sl, tgt, tl).equal(ck.model(src, sl, tgt, tl)));
  // A run folder resolves to its checkpoint.
  EXPECT_EQ(locate_checkpoint(std::filesystem::path(dir).parent_path().string(), CheckpointUse::kUse), dir);
}

// nmt::Translator: what its options leave unset comes from the checkpoint's
// config, what they set wins; a model trained with LibTorch's attention
// translates on the runtime with flash unless torch is asked for; it
// translates as the runtime's search does on the weights it opened, in the
// compute type asked for, and leaves the calling thread's settings alone.
TEST(Translator, OptionsWinOverTheCheckpointsConfig) {
  const auto& paths = testing::toy_tokenizers();
  const Tokenizer zh(paths.src_model), en(paths.tgt_model);
  Config cfg = testing::tiny_config();
  cfg.attention.backend = AttentionBackend::kTorch;
  cfg.decode.compute_type = ComputeType::kFloat32;
  cfg.decode.beam = 2;
  cfg.decode.length_penalty = 0.5;
  cfg.train.threads = 1;
  torch::manual_seed(3);
  Transformer m = build_model(cfg, zh.vocab_size(), en.vocab_size());
  m->eval();
  const std::string dir = testing::temp_dir("translator") + "/last";
  save_checkpoint(dir, m, nullptr, TrainingState{}, cfg, paths.src_model, paths.tgt_model);
  const std::vector<std::string> lines = {"我爱水课", "", "你昨天丢了一把钥匙"};

  const Translator plain(dir);
  EXPECT_EQ(plain.impl().attention, AttentionBackend::kFlash);
  EXPECT_EQ(plain.impl().compute_type, ops::ComputeType::kFloat32);
  EXPECT_EQ(plain.impl().decode_options({}).beam, 2);
  EXPECT_EQ(plain.impl().decode_options({}).length_penalty, 0.5);
  EXPECT_EQ(plain.impl().threads, 1);
  EXPECT_NE(plain.description().find("CPU runtime: float32, flash attention"), std::string::npos)
      << plain.description();

  TranslatorOptions o;
  o.attention = AttentionBackend::kNaive;
  o.compute_type = ComputeType::kInt8;
  o.threads = 2;
  const Translator chosen(dir, o);
  EXPECT_EQ(chosen.impl().attention, AttentionBackend::kNaive);
  EXPECT_EQ(chosen.impl().compute_type, ops::ComputeType::kInt8);
  EXPECT_EQ(chosen.impl().threads, 2);
  EXPECT_NE(chosen.description().find("int8"), std::string::npos) << chosen.description();

  // LibTorch's attention when asked: the LibTorch model in float32; its
  // bf16 and int8 have no path of their own and run the runtime's flash.
  o.attention = AttentionBackend::kTorch;
  o.compute_type = ComputeType::kFloat32;
  EXPECT_NE(Translator(dir, o).description().find("LibTorch"), std::string::npos);
  o.compute_type = ComputeType::kBf16;
  EXPECT_EQ(Translator(dir, o).impl().attention, AttentionBackend::kFlash);

  // The same translations as the runtime's search on those weights, int8,
  // naive attention; the calling thread's LibTorch and OpenMP settings as
  // they were.
  const int threads_before = at::get_num_threads();
  TranslationOptions greedy;
  greedy.beam_size = 0;
  const std::vector<TranslationResult> got = chosen.translate_batch(lines, greedy);
  EXPECT_EQ(at::get_num_threads(), threads_before);
  ASSERT_EQ(got.size(), lines.size());
  DecodeOptions want_options = chosen.impl().decode_options(greedy);
  std::vector<std::vector<int64_t>> sources;
  for (const std::string& l : lines) sources.push_back(zh.encode(l));
  const auto want = testing::search_all(*testing::cpu_model(m, ops::ComputeType::kInt8, true), sources, want_options);
  for (size_t i = 0; i < lines.size(); ++i) {
    ASSERT_EQ(got[i].hypotheses.size(), 1u);
    EXPECT_EQ(got[i].hypotheses[0], en.decode(want[i])) << "line " << i;
    EXPECT_EQ(got[i].source_tokens, static_cast<int64_t>(sources[i].size()));
  }
  EXPECT_EQ(got[1].hypotheses[0], "");
  // Unset call options take the checkpoint's decode section (beam 2).
  want_options.beam = 2;
  const auto beam = testing::search_all(*testing::cpu_model(m, ops::ComputeType::kInt8, true), sources, want_options);
  const auto got_beam = chosen.translate_batch(lines);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(got_beam[i].hypotheses[0], en.decode(beam[i])) << "line " << i;

  // A device this build or machine cannot give is a one-line input error naming the option.
  if (!torch::cuda::is_available()) {
    TranslatorOptions cuda;
    cuda.device = Device::kCuda;
    try {
      Translator t(dir, cuda);
      ADD_FAILURE() << "cuda without a GPU was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("device: cuda requested", 0), 0u) << e.what();
    }
  }
  // Options out of range name their field.
  TranslationOptions wide;
  wide.beam_size = 65;
  EXPECT_THROW(
      try { plain.translate_batch(lines, wide); } catch (const InputError& e) {
        EXPECT_STREQ(e.what(), "beam_size: 65 is not in 0..64");
        throw;
      },
      InputError);
}

TEST(Checkpoint, MissingOrCorruptFilesAreInputErrors) {
  const auto& paths = testing::toy_tokenizers();
  Config cfg = testing::tiny_config();
  Transformer m = build_model(cfg, 100, 100);
  const std::string dir = testing::temp_dir("ckpt_bad") + "/last";
  save_checkpoint(dir, m, nullptr, TrainingState{}, cfg, paths.src_model, paths.tgt_model);
  // Vocabulary sizes differ from the tokenizers': the weights do not fit.
  EXPECT_THROW(load_checkpoint(dir, torch::kCPU), InputError);
  std::filesystem::remove(dir + "/model.pt");
  EXPECT_THROW(load_checkpoint(dir, torch::kCPU), InputError);
}

TEST(Manifest, CatchesTruncatedEditedAndMissingFiles) {
  const fs::path dir = testing::temp_dir("manifest");
  write_file_atomic((dir / "model.pt").string(), std::string(5000, 'w'));
  write_file_atomic((dir / "state.yaml").string(), "step: 3\n");
  write_manifest(dir.string(), {"model.pt", "state.yaml"});
  EXPECT_TRUE(checkpoint_complete(dir.string()));
  const auto message = [&] {
    try {
      verify_manifest(dir.string());
      return std::string("no error");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
  };
  fs::resize_file(dir / "model.pt", 4000);
  EXPECT_NE(message().find("model.pt: 4000 bytes, the manifest says 5000"), std::string::npos) << message();
  write_file_atomic((dir / "model.pt").string(), std::string(5000, 'v'));
  EXPECT_NE(message().find("model.pt: content differs from the manifest's checksum"), std::string::npos);
  fs::remove(dir / "model.pt");
  EXPECT_NE(message().find("model.pt: listed in the manifest but missing"), std::string::npos);
  EXPECT_FALSE(checkpoint_complete(dir.string()));
}

TEST(Manifest, RejectsMalformedLinesNamingTheLine) {
  const std::string good = "nmt checkpoint manifest 1\n" + std::string(64, 'a') + " 12 model.pt\n";
  EXPECT_EQ(parse_manifest(good, "m").size(), 1u);
  for (const auto& [text, problem] : std::vector<std::pair<std::string, std::string>>{
           {"", "m: empty manifest"},
           {"other header\n", "m:1: not an nmt checkpoint manifest"},
           {"nmt checkpoint manifest 1\nabc 12 model.pt\n", "m:2: 'abc' is not a SHA-256"},
           {"nmt checkpoint manifest 1\n" + std::string(64, 'a') + " -1 x\n", "m:2: '-1' is not a file size"},
           {"nmt checkpoint manifest 1\n" + std::string(64, 'a') + " 1 ../etc/passwd\n", "is not a file name"},
           {good + std::string(64, 'b') + " 3 model.pt\n", "m:3: model.pt is listed twice"}}) {
    try {
      parse_manifest(text, "m");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
    }
  }
}

TEST(TrainingState, RoundTripsAndRejectsTextThatIsNotUtf8) {
  TrainingState s;
  s.step = 7;
  s.position = {1, 2};
  s.metrics = {{"bleu", 12.5}, {"loss", 2.25}};
  s.best = 12.5;
  s.evals_since_best = 1;
  const TrainingState t = parse_training_state(training_state_yaml(s), "state.yaml");
  EXPECT_EQ(t.step, 7);
  EXPECT_EQ(t.position, s.position);
  EXPECT_EQ(t.metrics, s.metrics);
  EXPECT_EQ(t.best, 12.5);
  EXPECT_EQ(t.evals_since_best, 1);
  // Found by tests/fuzz/fuzz_checkpoint: yaml-cpp kept the byte 0x88 of the
  // metric name, training_state_yaml() wrote it as U+FFFD.
  const std::string bad =
      "step: 0\nepoch: 0\nbatch_in_epoch: 0\nbest: .nan\nevals_since_best: 0\nmetrics:\n  a\x88: 1\n";
  try {
    parse_training_state(bad, "state.yaml");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "state.yaml: unreadable training state: not valid UTF-8");
  }
  // Also found by it: a NUL in a plain scalar came out of yaml-cpp as a
  // stray byte 0xA0, which training_state_yaml() wrote as U+FFFD.
  const std::string nul = "step: 0\nepoch: 0\nbatch_in_epoch: 0\nbest: 0\nevals_since_best: 0\nmetrics:\n  ab" +
                          std::string(1, '\0') + "_cd: 1\n";
  try {
    parse_training_state(nul, "state.yaml");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "state.yaml: unreadable training state: NUL character");
  }
}

TEST(TrainingState, RoundTripsAndRejectsBadCounters) {
  TrainingState s;
  s.step = 1234;
  s.position = {2, 17};
  s.best = 0.1 + 0.2;  // not exactly representable in few digits
  s.evals_since_best = 3;
  s.train_seconds = 812.25;
  s.wall_seconds = 901.5;
  s.metrics = {{"bleu", 21.5}, {"loss", 3.25}};
  const TrainingState r = parse_training_state(training_state_yaml(s), "state.yaml");
  EXPECT_EQ(r.step, s.step);
  EXPECT_EQ(r.position.epoch, 2);
  EXPECT_EQ(r.position.batch, 17);
  EXPECT_EQ(r.best, s.best);
  EXPECT_EQ(r.evals_since_best, 3);
  EXPECT_EQ(r.train_seconds, s.train_seconds);
  EXPECT_EQ(r.wall_seconds, s.wall_seconds);
  EXPECT_EQ(r.metrics, s.metrics);
  // A state written before the clocks were kept still loads, at zero time.
  const TrainingState old = parse_training_state(
      "step: 5\nepoch: 0\nbatch_in_epoch: 5\nbest: .nan\nevals_since_best: 0\nmetrics: {}\n", "old.yaml");
  EXPECT_EQ(old.step, 5);
  EXPECT_EQ(old.train_seconds, 0);
  // ... and records no length ratio (runtime/length_limit.h): NaN, not 0.
  EXPECT_TRUE(std::isnan(old.target_source_ratio));
  EXPECT_TRUE(std::isnan(r.target_source_ratio));
  s.target_source_ratio = 2.17;
  EXPECT_EQ(parse_training_state(training_state_yaml(s), "state.yaml").target_source_ratio, 2.17);
  // The run's precision: kept when recorded, empty in an older state.
  EXPECT_EQ(old.precision, "");
  EXPECT_EQ(r.precision, "");
  for (const char* p : {"float32", "bf16"}) {
    s.precision = p;
    EXPECT_EQ(parse_training_state(training_state_yaml(s), "state.yaml").precision, p);
  }
  for (const char* bad : {"step: 1\nepoch: 0\nbatch_in_epoch: 0\nbest: 0\nevals_since_best: 0\nprecision: auto\n",
                          "step: -1\nepoch: 0\nbatch_in_epoch: 0\nbest: 0\nevals_since_best: 0\n",
                          "step: 1\nepoch: 0\nbatch_in_epoch: 0\nbest: 0\nevals_since_best: 0\ntrain_seconds: -3\n",
                          "step: 1\nepoch: 0\nbatch_in_epoch: 0\nbest: 0\nevals_since_best: 0\ntarget_source_ratio: -2\n",
                          "step: x\n", "- [1, 2\n"}) {
    try {
      parse_training_state(bad, "bad.yaml");
      FAIL() << "accepted: " << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("bad.yaml: unreadable training state", 0), 0u) << e.what();
    }
  }
}

struct SmallRun {
  Config cfg = testing::tiny_config();
  Transformer model{nullptr};
  std::string src_model, tgt_model;

  SmallRun() {
    const auto& paths = testing::toy_tokenizers();
    src_model = paths.src_model, tgt_model = paths.tgt_model;
    const Tokenizer zh(src_model), en(tgt_model);
    model = build_model(cfg, zh.vocab_size(), en.vocab_size());
    model->eval();
  }
  // A save whose every weight equals its step: a reader can tell which save
  // each half of what it read came from.
  void save(const std::string& dir, int64_t step) {
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.fill_(static_cast<double>(step));
    }
    TrainingState st;
    st.step = step;
    save_checkpoint(dir, model, nullptr, st, cfg, src_model, tgt_model);
  }
};

// Every entry under `dir` with its inode, size and change time: equal
// snapshots mean nothing was created, deleted, renamed or written.
std::set<std::string> snapshot(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    out.insert(e.path().string() + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
               std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec));
  }
  return out;
}

TEST(CheckpointRead, ConcurrentSavesNeverMixTwoSavesNorFailAReader) {
  SmallRun run;
  const std::string dir = testing::temp_dir("ckpt_concurrent") + "/last";
  run.save(dir, 1);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> saves{1};
  std::thread writer([&] {
    for (int64_t step = 2; !stop; ++step) {
      run.save(dir, step);
      saves = step;
    }
  });
  int64_t loads = 0, last_step = 0;
  std::string failure;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < until || saves < 20) {
    try {
      const LoadedCheckpoint ck = load_checkpoint(dir, torch::kCPU);
      const double weight = ck.model->parameters().front().flatten()[0].item<double>();
      if (weight != static_cast<double>(ck.state.step)) {
        failure = "state.yaml of step " + std::to_string(ck.state.step) + " with weights of step " +
                  std::to_string(weight);
        break;
      }
      EXPECT_GE(ck.state.step, last_step) << "a reader went back in time";
      last_step = ck.state.step;
      ++loads;
    } catch (const std::exception& e) {
      failure = e.what();
      break;
    }
  }
  stop = true;
  writer.join();
  EXPECT_EQ(failure, "") << "after " << loads << " loads during " << saves << " saves";
  EXPECT_GT(loads, 10);
  if (failure.empty())
    std::printf("%lld loads during %lld saves, none mixed or failed\n", static_cast<long long>(loads),
                static_cast<long long>(saves.load()));
}

TEST(CheckpointRead, ReadersNeverChangeTheFolderAndTheWriterTidiesIt) {
  SmallRun run;
  const fs::path root = testing::temp_dir("ckpt_leftovers");
  run.save((root / "last").string(), 8);
  run.save((root / "best").string(), 4);
  // As a save cut short between its two renames leaves it (file systems
  // without an atomic exchange): best/ is at best.old; and a staged last.tmp
  // that never got its manifest.
  fs::rename(root / "best", root / "best.old");
  fs::create_directories(root / "last.tmp");
  std::ofstream(root / "last.tmp" / "model.pt") << "half";
  const auto before = snapshot(root);

  std::string note;
  EXPECT_EQ(locate_checkpoint(root.string(), CheckpointUse::kUse, &note), (root / "best.old").string());
  EXPECT_NE(note.find("nmt train --resume " + root.string()), std::string::npos) << note;
  EXPECT_NE(note.find("last.tmp was left by an interrupted save"), std::string::npos) << note;
  EXPECT_EQ(load_checkpoint(root.string(), torch::kCPU).state.step, 4);  // best, where it lies
  EXPECT_EQ(locate_checkpoint(root.string(), CheckpointUse::kResume), (root / "last").string());
  EXPECT_EQ(load_checkpoint((root / "best").string(), torch::kCPU).state.step, 4);
  EXPECT_EQ(snapshot(root), before) << "a reader changed the run folder";

  // While a trainer holds the run, leftovers are its save in progress: no note.
  {
    RunLock lock(root.string());
    const auto locked = snapshot(root);
    note.clear();
    locate_checkpoint(root.string(), CheckpointUse::kUse, &note);
    EXPECT_EQ(note, "");
    load_checkpoint(root.string(), torch::kCPU);
    EXPECT_EQ(snapshot(root), locked);
  }

  // The writer's side puts best/ back and removes the leftovers.
  EXPECT_NE(recover_checkpoints(root.string()), "");
  EXPECT_TRUE(fs::exists(root / "best" / "manifest.txt"));
  EXPECT_FALSE(fs::exists(root / "best.old"));
  EXPECT_FALSE(fs::exists(root / "last.tmp"));
  EXPECT_EQ(checkpoints_in(root.string()), (std::vector<std::string>{"last", "best"}));
}

TEST(CheckpointRead, WhichFolderEachCommandMeans) {
  SmallRun run;
  const fs::path root = testing::temp_dir("ckpt_rules");
  EXPECT_EQ(locate_checkpoint(root.string(), CheckpointUse::kUse), "");
  EXPECT_TRUE(checkpoints_in(root.string()).empty());
  run.save((root / "last").string(), 6);
  EXPECT_EQ(locate_checkpoint(root.string(), CheckpointUse::kUse), (root / "last").string());
  run.save((root / "best").string(), 3);
  EXPECT_EQ(locate_checkpoint(root.string(), CheckpointUse::kUse), (root / "best").string());
  EXPECT_EQ(locate_checkpoint(root.string(), CheckpointUse::kResume), (root / "last").string());
  EXPECT_EQ(locate_checkpoint((root / "best").string(), CheckpointUse::kResume), (root / "best").string());
  // Only the files asked for are read, each checked against the manifest.
  const CheckpointFiles files = read_checkpoint(root.string(), CheckpointUse::kUse, {"state.yaml"});
  EXPECT_EQ(files.bytes.count("model.pt"), 0u);
  EXPECT_NE(files.at("state.yaml").find("step: 3"), std::string::npos);
  std::ofstream(root / "best" / "state.yaml", std::ios::app) << "#";
  EXPECT_THROW(read_checkpoint(root.string(), CheckpointUse::kUse, {"state.yaml"}), InputError);
}

TEST(RunLock, OneWriterPerFolderNamingTheHolder) {
  const std::string dir = testing::temp_dir("run_lock") + "/run";
  EXPECT_EQ(run_lock_holder(dir), "");
  EXPECT_FALSE(fs::exists(dir)) << "asking who holds the lock created something";
  auto first = std::make_unique<RunLock>(dir);
  const std::string holder = run_lock_holder(dir);
  EXPECT_NE(holder.find("pid " + std::to_string(::getpid()) + " on "), std::string::npos) << holder;
  try {
    RunLock second(dir);
    ADD_FAILURE() << "a second writer took the lock";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("another nmt train is writing this run folder (pid " +
                                         std::to_string(::getpid())),
              std::string::npos)
        << e.what();
  }
  first.reset();
  EXPECT_EQ(run_lock_holder(dir), "");
  RunLock again(dir);
}

TEST(RunLock, AKilledHolderLeavesNoStaleLock) {
  const std::string dir = testing::temp_dir("run_lock_killed");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  testing::Process child = testing::fork_child([&] {
    RunLock lock(dir);
    const char c = 1;
    if (::write(ready[1], &c, 1) != 1) return 3;
    ::pause();
    return 0;
  });
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_NE(run_lock_holder(dir).find("pid " + std::to_string(child.pid)), std::string::npos);
  EXPECT_THROW(RunLock{dir}, InputError);
  testing::kill_and_wait(child);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_EQ(run_lock_holder(dir), "");
  RunLock mine(dir);  // no clean-up was needed
}

}  // namespace
}  // namespace nmt
