// The small pieces everything else relies on: the UTF-8 decoder, SHA-256,
// the atomic file writer (with an injected full disk), checkpoint manifests
// and folder replacement with its crash recovery.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "checkpoint/manifest.h"
#include "checkpoint/state.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/sha256.h"
#include "util/utf8.h"

namespace nmt {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("nmt_util_test_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Utf8, AcceptsWellFormedAndRejectsTheRest) {
  EXPECT_TRUE(utf8::valid("plain ASCII"));
  EXPECT_TRUE(utf8::valid("我爱水课 — é 𝄞"));
  EXPECT_EQ(utf8::first_invalid("ok\xffno"), 2u);
  EXPECT_EQ(utf8::first_invalid("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(utf8::first_invalid("a\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(utf8::first_invalid("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8::first_invalid("ab\xe6\x88"), 2u);        // truncated at the end
  char32_t cp = 0;
  EXPECT_EQ(utf8::next("爱", 0, &cp), 3);
  EXPECT_EQ(cp, U'爱');
  EXPECT_EQ(utf8::strip_bom("\xEF\xBB\xBFline"), "line");
  EXPECT_EQ(utf8::strip_bom("line"), "line");
}

TEST(Sha256, NistVectors) {
  const auto hex = [](const std::string& s) {
    Sha256 h;
    h.update(s);
    return h.hex();
  };
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string a(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(a);
  EXPECT_EQ(million.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(WriteFileAtomic, ReplacesWholeFilesAndLeavesNoTemporary) {
  const fs::path dir = fresh_dir("atomic");
  const std::string path = (dir / "fig.svg").string();
  write_file_atomic(path, "first");
  write_file_atomic(path, "second, longer");
  EXPECT_EQ(slurp(path), "second, longer");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);  // no temporary left
  const std::string bad = (dir / "missing" / "fig.svg").string();
  try {
    write_file_atomic(bad, "x");
    FAIL() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(bad + ": cannot write: No such file or directory"), std::string::npos)
        << e.what();
  }
}

// `--output /dev/null` once replaced the device with a plain file (renamed
// over it). A FIFO stands in for the device here (no root needed); a
// symbolic link must keep pointing at the file, which gets the content.
TEST(WriteFileAtomic, WritesPipesInPlaceAndFollowsSymlinks) {
  const fs::path dir = fresh_dir("special");
  const std::string fifo = (dir / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // so that opening for writing does not block
  ASSERT_GE(reader, 0);
  write_file_atomic(fifo, "through the pipe");
  {
    AtomicFile f(fifo);
    std::ofstream(f.temp_path(), std::ios::binary) << ", twice";
    f.commit();
  }
  { AtomicFile abandoned(fifo); }  // destroyed without commit: must not delete the pipe
  char buf[64] = {};
  const ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "through the pipe, twice");
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0) << "the pipe is gone";
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the pipe was replaced by a regular file";

  const fs::path target = dir / "real.txt", link = dir / "link.txt";
  write_file_atomic(target.string(), "old");
  fs::create_symlink(target.filename(), link);
  write_file_atomic(link.string(), "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link))) << "the link was replaced by a regular file";
  EXPECT_EQ(slurp(target.string()), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 3);  // no temporary left
}

// NMT_TEST_WRITE_LIMIT is read once per process: this test runs in a child.
TEST(WriteFileAtomic, AFullDiskKeepsThePreviousFile) {
  const fs::path dir = fresh_dir("full");
  const std::string path = (dir / "out.txt").string();
  write_file_atomic(path, "the good old content");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("NMT_TEST_WRITE_LIMIT", "100", 1);
    int code = 3;
    try {
      write_file_atomic(path, std::string(1000, 'x'));
      code = 0;
    } catch (const IoError& e) {
      code = std::string(e.what()) == path + ": cannot write: No space left on device" ? 1 : 2;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 1) << "1: the one-line IoError; 0: no error; 2: another message";
  EXPECT_EQ(slurp(path), "the good old content");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
}

TEST(Manifest, CatchesTruncatedEditedAndMissingFiles) {
  const fs::path dir = fresh_dir("manifest");
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

bool has_marker(const std::string& folder) { return fs::exists(fs::path(folder) / "marker"); }

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
  for (const char* bad : {"step: -1\nepoch: 0\nbatch_in_epoch: 0\nbest: 0\nevals_since_best: 0\n",
                          "step: 1\nepoch: 0\nbatch_in_epoch: 0\nbest: 0\nevals_since_best: 0\ntrain_seconds: -3\n",
                          "step: x\n", "- [1, 2\n"}) {
    try {
      parse_training_state(bad, "bad.yaml");
      FAIL() << "accepted: " << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("bad.yaml: unreadable training state", 0), 0u) << e.what();
    }
  }
}

TEST(ReplaceDirectory, SwapsAndRecoversFromAnInterruptedSwap) {
  const fs::path dir = fresh_dir("replace");
  const std::string target = (dir / "last").string(), staged = target + ".tmp";
  fs::create_directories(staged);
  write_file_atomic(staged + "/marker", "1");
  replace_directory(staged, target);  // nothing there yet: a rename
  EXPECT_EQ(slurp(target + "/marker"), "1");
  fs::create_directories(staged);
  write_file_atomic(staged + "/marker", "2");
  replace_directory(staged, target);
  EXPECT_EQ(slurp(target + "/marker"), "2");
  EXPECT_FALSE(fs::exists(staged));
  // A crash between the two renames of the fallback: only last.old and last.tmp.
  fs::rename(target, target + ".old");
  fs::create_directories(staged);
  write_file_atomic(staged + "/marker", "3");
  const std::string did = recover_directory(target, staged, has_marker);
  EXPECT_NE(did.find("recovered"), std::string::npos) << did;
  EXPECT_EQ(slurp(target + "/marker"), "3");
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_FALSE(fs::exists(target + ".old"));
  EXPECT_EQ(recover_directory(target, staged, has_marker), "");
}

}  // namespace
}  // namespace nmt
