// Timing a piece of work on this machine: what the roofline account and the
// precision probe both ask (how long one call takes, steadily).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace nmt {

// Seconds per call of fn: the median of `samples` timings, each repeating fn
// until 20 ms passed, after a few untimed calls (packing buffers, thread
// pools warm up in them).
template <typename Fn>
double median_seconds_per_call(Fn&& fn, int samples = 5) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> per_call;
  for (int s = 0; s < samples; ++s) {
    int64_t calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < 0.02);
    per_call.push_back(elapsed / static_cast<double>(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace nmt
