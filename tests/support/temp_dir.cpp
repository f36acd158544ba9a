#include "temp_dir.h"

#include "util/atomic_file.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace nmt::testing {
namespace {

namespace fs = std::filesystem;

// The folders this process made; removed at its exit (static destruction,
// which _exit and exec skip), with nmt::remove_tree (see atomic_file.h for
// why not std::filesystem::remove_all).
struct Made {
  std::vector<std::string> dirs;
  ~Made() {
    if (std::getenv("KEEP") != nullptr) return;
    std::error_code ignored;
    for (const auto& d : dirs) nmt::remove_tree(d, ignored);
  }
};

}  // namespace

std::string temp_dir(const std::string& name) {
  static Made made;
  const fs::path d = fs::temp_directory_path() / ("nmt_test_" + std::to_string(::getpid()) + "_" + name);
  std::error_code ec;
  nmt::remove_tree(d.string(), ec);
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
