#include "temp_dir.h"

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
// which _exit and exec skip).
struct Made {
  std::vector<fs::path> dirs;
  ~Made() {
    if (std::getenv("KEEP") != nullptr) return;
    std::error_code ignored;
    for (const auto& d : dirs) fs::remove_all(d, ignored);
  }
};

}  // namespace

std::string temp_dir(const std::string& name) {
  static Made made;
  const fs::path d = fs::temp_directory_path() / ("nmt_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  made.dirs.push_back(d);
  return d.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace nmt::testing
