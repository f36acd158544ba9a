#include "util/test_hooks.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "util/interrupt.h"

namespace nmt {

namespace {

struct HoldSpec {
  std::string point, file;
  long nth = 1;
};

// NMT_TEST_HOLD, parsed once; an empty point when unset or malformed.
const HoldSpec& hold_spec() {
  static const HoldSpec spec = [] {
    HoldSpec s;
    const char* v = std::getenv("NMT_TEST_HOLD");
    if (!v) return s;
    const std::string text = v;
    const size_t colon = text.find(':');
    if (colon == std::string::npos || colon + 1 == text.size()) return s;
    std::string point = text.substr(0, colon);
    if (const size_t at = point.find('@'); at != std::string::npos) {
      s.nth = std::atol(point.c_str() + at + 1);
      point.resize(at);
    }
    if (s.nth < 1) return s;
    s.point = point;
    s.file = text.substr(colon + 1);
    return s;
  }();
  return spec;
}

bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace

void test_hold(const char* point, bool until_signal) {
  const HoldSpec& spec = hold_spec();
  if (spec.point.empty() || spec.point != point) return;
  static std::atomic<long> arrivals{0};
  if (++arrivals != spec.nth) return;
  {
    std::ofstream(spec.file) << ::getpid() << '\n';
  }
  std::fprintf(stderr, "test hold: at %s (until %s is removed%s)\n", point, spec.file.c_str(),
               until_signal ? " or a signal comes" : "");
  std::fflush(stderr);
  while (file_exists(spec.file) && !(until_signal && interrupted()))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void test_crash_at(int64_t rank, int64_t step, int64_t restart) {
  if (restart > 0) return;
  static const auto target = []() -> std::pair<int64_t, int64_t> {
    const char* v = std::getenv("NMT_TEST_CRASH_AT");
    long long r = -1, s = -1;
    if (v && std::sscanf(v, "%lld:%lld", &r, &s) == 2) return {r, s};
    return {-1, -1};
  }();
  if (target.first == rank && target.second == step) ::raise(SIGKILL);
}

}  // namespace nmt
