// The small pieces everything else relies on: the UTF-8 decoder, SHA-256,
// the atomic file writer (with an injected full disk) and folder
// replacement with its crash recovery.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"
#include "util/atomic_file.h"
#include "util/cpu_features.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/huge_page_allocator.h"
#include "util/sha256.h"
#include "util/utf8.h"

namespace nmt {
namespace {

namespace fs = std::filesystem;

using testing::slurp;

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
  const fs::path dir = testing::temp_dir("atomic");
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
  const fs::path dir = testing::temp_dir("special");
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
  const fs::path dir = testing::temp_dir("full");
  const std::string path = (dir / "out.txt").string();
  write_file_atomic(path, "the good old content");
  testing::Process child = testing::fork_child([&] {
    ::setenv("NMT_TEST_WRITE_LIMIT", "100", 1);
    int code = 3;
    try {
      write_file_atomic(path, std::string(1000, 'x'));
      code = 0;
    } catch (const IoError& e) {
      code = std::string(e.what()) == path + ": cannot write: No space left on device" ? 1 : 2;
    }
    return code;
  });
  const int status = testing::wait_for(child, std::chrono::seconds(60));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "1: the one-line IoError; 0: no error; 2: another message";
  EXPECT_EQ(slurp(path), "the good old content");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
}

// The appended log: lines land at the end of what the file held, in order;
// sync() works on a file and on a pipe-like target (/dev/null); a full disk
// is the one-line IoError (in a child: the limit is read once per process),
// and a folder that cannot hold the file fails at opening, naming it.
TEST(AppendFile, AppendsLinesAndSaysWhenItCannot) {
  const fs::path dir = testing::temp_dir("append");
  const std::string path = (dir / "log.jsonl").string();
  write_file_atomic(path, "{\"a\": 1}\n");
  {
    AppendFile log(path);
    log.append("{\"b\": 2}\n");
    log.sync();
    log.append("{\"c\": 3}\n");
  }
  EXPECT_EQ(slurp(path), "{\"a\": 1}\n{\"b\": 2}\n{\"c\": 3}\n");
  {
    AppendFile null("/dev/null");
    null.append("x\n");
    EXPECT_NO_THROW(null.sync());
  }
  const std::string missing = (dir / "no_such_folder" / "log.jsonl").string();
  try {
    AppendFile log(missing);
    ADD_FAILURE() << "opened " << missing;
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot open for appending: No such file or directory");
  }
  testing::Process child = testing::fork_child([&] {
    ::setenv("NMT_TEST_WRITE_LIMIT", "100", 1);
    try {
      AppendFile log(path);
      log.append(std::string(1000, 'x'));
      return 0;
    } catch (const IoError& e) {
      return std::string(e.what()) == path + ": cannot write: No space left on device" ? 1 : 2;
    }
  });
  const int status = testing::wait_for(child, std::chrono::seconds(60));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "1: the one-line IoError; 0: no error; 2: another message";
  EXPECT_EQ(slurp(path), "{\"a\": 1}\n{\"b\": 2}\n{\"c\": 3}\n") << "a refused append wrote nothing";
}

bool has_marker(const std::string& folder) { return fs::exists(fs::path(folder) / "marker"); }
bool is_marker(const std::string& name) { return name == "marker"; }

TEST(ReplaceDirectory, SwapsAndRecoversFromAnInterruptedSwap) {
  const fs::path dir = testing::temp_dir("replace");
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
  const std::string did = recover_directory(target, staged, has_marker, is_marker);
  EXPECT_NE(did.find("recovered"), std::string::npos) << did;
  EXPECT_EQ(slurp(target + "/marker"), "3");
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_FALSE(fs::exists(target + ".old"));
  EXPECT_EQ(recover_directory(target, staged, has_marker, is_marker), "");
  // A leftover holding a file nmt did not write is left, and said.
  fs::create_directories(target + ".old");
  write_file_atomic(target + ".old/notes.txt", "mine");
  const std::string left = recover_directory(target, staged, has_marker, is_marker);
  EXPECT_NE(left.find("left " + target + ".old as it is"), std::string::npos) << left;
  EXPECT_EQ(slurp(target + ".old/notes.txt"), "mine");
}

// Only what nmt wrote is deleted: a folder is judged by every entry's name
// before anything goes (the temporaries of atomic writes count as their file).
TEST(RemoveOwnedTree, DeletesOnlyFoldersHoldingNothingButOurFiles) {
  const fs::path dir = testing::temp_dir("owned");
  const auto ours = [](const std::string& name) { return name == "model.bin" || name == "config.json"; };
  const std::string mine = (dir / "mine").string();
  fs::create_directories(mine + "/sub");
  write_file_atomic(mine + "/model.bin", "m");
  write_file_atomic(mine + "/notes.txt", "my notes");
  EXPECT_EQ(first_foreign_entry(mine, ours), mine + "/notes.txt");
  try {
    remove_owned_tree(mine, ours, "an export");
    ADD_FAILURE() << "a folder holding a user's file was deleted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(mine + "/notes.txt: not written by nmt", 0), 0u) << e.what();
  }
  EXPECT_EQ(slurp(mine + "/notes.txt"), "my notes");
  EXPECT_TRUE(fs::exists(mine + "/model.bin"));
  fs::remove(mine + "/notes.txt");
  EXPECT_EQ(first_foreign_entry(mine, ours), mine + "/sub");  // a folder of ours holds no sub-folder
  fs::remove(mine + "/sub");
  write_file_atomic(mine + "/config.json.tmp.123.4", "a write cut short");
  EXPECT_EQ(first_foreign_entry(mine, ours), "");
  remove_owned_tree(mine, ours, "an export");
  EXPECT_FALSE(fs::exists(mine));
  remove_owned_tree(mine, ours, "an export");  // missing: no error
  // Not a folder: never ours.
  write_file_atomic((dir / "file").string(), "x");
  EXPECT_EQ(first_foreign_entry((dir / "file").string(), ours), (dir / "file").string());
  EXPECT_EQ(first_foreign_entry((dir / "none").string(), ours), "");
}

}  // namespace
}  // namespace nmt

namespace {
// The huge pages the kernel gave the mapping holding `p`, in kB (smaps'
// AnonHugePages of that mapping), or -1 if it is not found.
long anon_huge_kb_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (std::isxdigit(static_cast<unsigned char>(line[0])) && (range >> std::hex >> lo >> dash >> hi) && dash == '-') {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stol(line.substr(14));
    }
  }
  return -1;
}

TEST(HugePageAllocator, LargeArraysGetHugePagesSmallOnesOrdinaryMemory) {
  std::vector<float, nmt::HugePageAllocator<float>> small(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  std::vector<float, nmt::HugePageAllocator<float>> large(size_t{6} << 20);  // 24 MB, touched by the zeroing
  for (size_t i = 0; i < large.size(); i += 1000) large[i] = static_cast<float>(i);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data()) % (size_t{2} << 20), 0u);
  EXPECT_EQ(large[6000], 6000.0f);
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(thp, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "transparent huge pages are off here (" << modes << ")";
  // The kernel may decline (memory too fragmented); most of 24 MB in huge
  // pages shows the advice was given before the first touch.
  EXPECT_GE(anon_huge_kb_at(large.data() + large.size() / 2), 12 * 1024) << "THP: " << modes;
}

}  // namespace

namespace nmt {
namespace {

// train.precision: auto takes bf16 on a CPU only where a bf16 product runs
// kBf16TrainingPays times as fast as a float32 one, measured.
TEST(Precision, AutoTakesBf16WhereItsProductsPay) {
  const c10::Device cpu(c10::kCPU);
  int asked = 0;
  const auto speedup = [&](double x) {
    return [&asked, x] {
      ++asked;
      return x;
    };
  };
  const c10::ScalarType fast_bf16 = cpu_has_fast_bf16() ? c10::kBFloat16 : c10::kFloat;
  EXPECT_EQ(resolve_precision(Precision::kAuto, cpu, "train.precision", speedup(kBf16TrainingPays)), fast_bf16);
  EXPECT_EQ(resolve_precision(Precision::kAuto, cpu, "train.precision", speedup(2.0)), fast_bf16);
  EXPECT_EQ(resolve_precision(Precision::kAuto, cpu, "train.precision", speedup(kBf16TrainingPays - 0.01)), c10::kFloat);
  EXPECT_EQ(resolve_precision(Precision::kAuto, cpu, "train.precision", speedup(0.6)), c10::kFloat);
  EXPECT_EQ(asked, cpu_has_fast_bf16() ? 4 : 0) << "measured only where the CPU can run bf16 products";
  EXPECT_EQ(resolve_precision(Precision::kAuto, cpu, "train.precision"), fast_bf16) << "no measurement: bf16 where it runs";
  EXPECT_EQ(resolve_precision(Precision::kFloat32, cpu, "train.precision", speedup(9.0)), c10::kFloat);
  EXPECT_EQ(resolve_precision(Precision::kAuto, c10::Device(c10::kCUDA), "train.precision", speedup(0.5)), c10::kBFloat16);
  EXPECT_EQ(asked, cpu_has_fast_bf16() ? 4 : 0) << "float32 and a GPU need no measurement";
  // A resumed run's precision: auto keeps it without measuring where the
  // device computes in it; a named precision wins over it.
  EXPECT_EQ(resolve_precision(Precision::kAuto, cpu, "train.precision", speedup(9.0), "float32"), c10::kFloat);
  EXPECT_EQ(resolve_precision(Precision::kAuto, cpu, "train.precision", speedup(0.5), "bf16"), fast_bf16);
  EXPECT_EQ(resolve_precision(Precision::kFloat32, cpu, "train.precision", speedup(9.0), "bf16"), c10::kFloat);
  EXPECT_EQ(asked, cpu_has_fast_bf16() ? 4 : 0) << "a kept precision is not measured";
  EXPECT_STREQ(precision_name(c10::kBFloat16), "bf16");
  EXPECT_STREQ(precision_name(c10::kFloat), "float32");
  // The measurement itself: a ratio of two positive times.
  const double measured = bf16_product_speedup(256, 64, 128);
  EXPECT_TRUE(std::isfinite(measured) && measured > 0) << measured;
}

}  // namespace
}  // namespace nmt
