// Checkpoint folders shared between one writer and any number of readers:
// reads that never mix two saves and never change the folder, the rules for
// which folder a command means, and the one-writer lock.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "train/checkpoint_writer.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/run_lock.h"
#include "model/build.h"
#include "test_util.h"
#include "util/errors.h"

namespace nmt {
namespace {

namespace fs = std::filesystem;

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
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RunLock lock(dir);
    const char c = 1;
    if (::write(ready[1], &c, 1) != 1) ::_exit(3);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_NE(run_lock_holder(dir).find("pid " + std::to_string(child)), std::string::npos);
  EXPECT_THROW(RunLock{dir}, InputError);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_EQ(run_lock_holder(dir), "");
  RunLock mine(dir);  // no clean-up was needed
}

}  // namespace
}  // namespace nmt
