#include "train/op_profiler.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace nmt {

namespace prof = torch::autograd::profiler;

void OpProfiler::start() {
  prof::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
}

std::vector<OpTime> OpProfiler::stop() {
  const prof::thread_event_lists lists = prof::disableProfilerLegacy();
  std::map<std::string, OpTime> by_name;
  std::map<std::string, std::map<std::string, int64_t>> callers;
  for (const auto& events : lists) {
    // Ranges nest per thread: a stack of open ranges and their children's time.
    struct Open {
      const prof::LegacyEvent* push;
      double children_us;
    };
    std::vector<Open> stack;
    for (const auto& e : events) {
      if (e.kind() == prof::EventKind::PushRange) {
        stack.push_back({&e, 0.0});
      } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
        const Open open = stack.back();
        stack.pop_back();
        const double us = open.push->cpuElapsedUs(e);
        OpTime& t = by_name[open.push->name()];
        t.name = open.push->name();
        ++t.calls;
        t.total_ms += us / 1000.0;
        t.self_ms += std::max(0.0, us - open.children_us) / 1000.0;
        if (!stack.empty()) {
          stack.back().children_us += us;
          ++callers[t.name][stack.back().push->name()];
        }
      }
    }
  }
  std::vector<OpTime> out;
  for (auto& [name, t] : by_name) {
    int64_t most = 0;
    for (const auto& [caller, n] : callers[name])
      if (n > most) most = n, t.caller = caller;
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.self_ms > b.self_ms; });
  return out;
}

std::string format_profile(const std::vector<OpTime>& ops, int64_t steps, double wall_ms, int top) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "%-44s %8s %12s %8s  %s\n", "op (self time)", "calls", "ms/step",
                "share", "mostly called from");
  s += line;
  double shown = 0;
  for (int i = 0; i < top && i < static_cast<int>(ops.size()); ++i) {
    const OpTime& t = ops[i];
    shown += t.self_ms;
    std::snprintf(line, sizeof line, "%-44.44s %8lld %12.2f %7.1f%%  %s\n", t.name.c_str(),
                  static_cast<long long>(t.calls / std::max<int64_t>(steps, 1)), t.self_ms / steps,
                  100.0 * t.self_ms / wall_ms, t.caller.c_str());
    s += line;
  }
  double all = 0;
  for (const auto& t : ops) all += t.self_ms;
  std::snprintf(line, sizeof line, "%-44s %8s %12.2f %7.1f%%\n", "other ops", "", (all - shown) / steps,
                100.0 * (all - shown) / wall_ms);
  s += line;
  std::snprintf(line, sizeof line, "%-44s %8s %12.2f %7.1f%%\n", "outside any op (framework, Python-free glue)",
                "", (wall_ms - all) / steps, 100.0 * (wall_ms - all) / wall_ms);
  s += line;
  std::snprintf(line, sizeof line, "%-44s %8s %12.2f %7.1f%%\n", "step (wall)", "", wall_ms / steps, 100.0);
  s += line;
  return s;
}

}  // namespace nmt
