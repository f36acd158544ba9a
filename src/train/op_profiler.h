// Where a training step's time goes, per LibTorch op (and our own ops, which
// record themselves): LibTorch's profiler around some steps, summarized as
// self time per op name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

struct OpTime {
  std::string name;
  int64_t calls = 0;
  double self_ms = 0;   // time in the op itself, ops it called excluded
  double total_ms = 0;  // including the ops it called
  std::string caller;   // the op that most often called it ("" at top level)
};

class OpProfiler {
 public:
  void start();
  // Stops recording; ops sorted by self time, largest first.
  std::vector<OpTime> stop();
};

// A table of the top ops: self ms per step and share of the step's wall time.
std::string format_profile(const std::vector<OpTime>& ops, int64_t steps, double wall_ms, int top);

}  // namespace nmt
