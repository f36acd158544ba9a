#include "temp_dir.h"

#include <ftw.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace nmt::testing {
namespace {

namespace fs = std::filesystem;

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  std::remove(path);  // files and (emptied, depth first) folders alike
  return 0;
}

// The folders this process made; removed at its exit (static destruction,
// which _exit and exec skip). With POSIX calls, not std::filesystem: PyPI's
// LibTorch exports its own std::filesystem::remove_all, which the loader
// binds ours to, and which crashes when called this late.
struct Made {
  std::vector<std::string> dirs;
  ~Made() {
    if (std::getenv("KEEP") != nullptr) return;
    for (const auto& d : dirs) nftw(d.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
};

}  // namespace

std::string temp_dir(const std::string& name) {
  static Made made;
  const fs::path d = fs::temp_directory_path() / ("nmt_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  made.dirs.push_back(d.string());
  return d.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace nmt::testing
