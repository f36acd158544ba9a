#include "train/op_profiler.h"

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "ops/linear/cpu/peak_cpu.h"
#include "ops/linear/dense.h"
#include "util/cpu_features.h"
#include "util/timing.h"

namespace nmt {

namespace prof = torch::autograd::profiler;

void OpProfiler::start() {
  // Input shapes: the matrix multiplies' FLOPs come from them.
  prof::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU, /*report_input_shapes=*/true));
}

namespace {

bool is_gemm(const std::string& name) {
  // nmt::cpu_gemm: a product by oneDNN's, MKL's or nmt's gemm (ops/linear/dense.cpp),
  // recorded with the float32 output it writes or adds into first, as addmm_.
  static const char* const kNames[] = {"aten::mm",  "aten::addmm",   "aten::addmm_",
                                       "aten::bmm", "aten::baddbmm", "nmt::cpu_gemm"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

// [batch ×] [m, k] · [k, n] from an op's input shapes: mm and bmm multiply
// their first two inputs, addmm, addmm_ and baddbmm their second and third
// (after the bias or the output they add to). False for shapes that do not
// meet.
bool gemm_shape(const std::string& op, const std::vector<std::vector<int64_t>>& shapes, GemmTime& g) {
  const size_t first = op == "aten::mm" || op == "aten::bmm" ? 0 : 1;
  if (shapes.size() < first + 2) return false;
  const auto& a = shapes[first];
  const auto& b = shapes[first + 1];
  const size_t r = a.size();
  if (b.size() != r || (r != 2 && r != 3) || a[r - 1] != b[r - 2] || (r == 3 && a[0] != b[0])) return false;
  g.batch = r == 3 ? a[0] : 1;
  g.m = a[r - 2], g.k = a[r - 1], g.n = b[r - 1];
  return true;
}

}  // namespace

std::vector<OpTime> OpProfiler::stop() {
  const prof::thread_event_lists lists = prof::disableProfilerLegacy();
  std::map<std::string, OpTime> by_name;
  std::map<std::string, std::map<std::string, int64_t>> callers;
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t, int64_t>, GemmTime> gemms;
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
        GemmTime g;
        if (is_gemm(t.name) && gemm_shape(t.name, open.push->shapes(), g)) {
          GemmTime& acc = gemms[std::make_tuple(t.name, g.batch, g.m, g.k, g.n)];
          if (acc.calls == 0) acc = g, acc.op = t.name;
          ++acc.calls;
          acc.self_ms += std::max(0.0, us - open.children_us) / 1000.0;
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
  gemms_.clear();
  for (const auto& [key, g] : gemms) gemms_.push_back(g);
  std::sort(gemms_.begin(), gemms_.end(), [](const GemmTime& a, const GemmTime& b) { return a.self_ms > b.self_ms; });
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

std::string op_class(const std::string& name) {
  std::string n = name;
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
  if (is_gemm(name) || n == "aten::matmul" || n == "aten::linear" || n == "nmt::dense" || n == "nmt::rows_matmul")
    return "matrix multiplies";
  // Our ops' backward passes are autograd nodes named after their function
  // (CppNode<...PackedAttentionFunction...>); LibTorch's own (AddmmBackward0)
  // only hand gradients on, and their children are counted where they belong.
  if (has("attention")) return "attention";
  if (has("layer_norm") || has("layernorm")) return "layer norm";
  if (has("cross_entropy") || has("crossentropy") || has("softmax")) return "softmax / cross-entropy";
  if (has("adam") || has("grad_norm")) return "optimizer";
  if (has("relu") || has("dropout") || has("bernoulli")) return "activation / dropout";
  if (has("embed")) return "embedding";
  static const char* const kCopies[] = {"aten::copy_", "aten::_to_copy", "aten::to",    "aten::fill_",
                                        "aten::zero_", "aten::zeros",    "aten::empty", "aten::cat",
                                        "aten::clone", "aten::contiguous", "aten::slice_backward"};
  for (const char* c : kCopies)
    if (n == c) return "copies and casts";
  if (has("backward")) return "autograd";
  return "other";
}

double gemm_peak_gflops(const GemmTime& g, bool bf16) {
  torch::NoGradGuard no_grad;
  const auto opts = at::TensorOptions().dtype(bf16 ? at::kBFloat16 : at::kFloat);
  if (g.op == "nmt::cpu_gemm" && g.batch == 1) {
    // Timed as the step runs it: the gemm in use into a float32 output (bf16
    // inputs: a weight gradient, Aᵀ · B added into its buffer).
    at::Tensor out = at::zeros({g.m, g.n});
    const at::Tensor a = bf16 ? at::randn({g.k, g.m}, opts) : at::randn({g.m, g.k}, opts);
    const at::Tensor b = at::randn({g.k, g.n}, opts);
    const double seconds = median_seconds_per_call([&] {
      if (bf16) {
        ops::add_at_b(out, a, b);
      } else {
        ops::product_into(out, a, b, at::Tensor());
      }
    });
    return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.k * g.n) / seconds / 1e9;
  }
  const at::Tensor a = g.batch > 1 ? at::randn({g.batch, g.m, g.k}, opts) : at::randn({g.m, g.k}, opts);
  const at::Tensor b = g.batch > 1 ? at::randn({g.batch, g.k, g.n}, opts) : at::randn({g.k, g.n}, opts);
  at::Tensor c;
  const double seconds = median_seconds_per_call([&] { c = g.batch > 1 ? at::bmm(a, b) : at::mm(a, b); });
  return 2.0 * static_cast<double>(g.batch * g.m) * static_cast<double>(g.k * g.n) / seconds / 1e9;
}

double stream_gbps() {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  const double seconds = median_seconds_per_call([&] { std::memcpy(to.data(), from.data(), bytes); }, 3);
  return 2.0 * static_cast<double>(bytes) / seconds / 1e9;
}

std::string format_arithmetic_peak(double gemm_flops, double gemm_ms, double step_ms, bool bf16, double peak_gflops,
                                   int threads) {
  const std::string what = bf16 ? "vdpbf16ps bf16 dot products" : std::string(isa_name(kernel_isa())) +
                                                                       (kernel_isa() == CpuIsa::kGeneric
                                                                            ? " multiplies and adds"
                                                                            : " fused multiply-adds");
  if (peak_gflops <= 0)
    return fmt::format("the cores' arithmetic peak: not measured ({} need AVX512-BF16 and the AVX-512 kernels)\n",
                       what);
  std::string s = fmt::format("the cores' arithmetic peak: {:.1f} GFLOP/s ({}, {} threads, registers only)", peak_gflops,
                              what, threads);
  if (bf16 && cpu_features().amx_bf16) s += ", below what AMX tiles reach: not a roof for oneDNN's bf16 products";
  s += "\n";
  if (gemm_ms > 0 && step_ms > 0) {
    const double achieved = gemm_flops / (gemm_ms / 1e3) / 1e9;  // GFLOP/s
    const double at_peak_ms = gemm_flops / (peak_gflops * 1e9) * 1e3;
    s += fmt::format(
        "the GEMMs at {:.0f}% of it ({:.1f} GFLOP/s); the step at {:.0f}% of it (its {:.2f} GFLOP at the peak take "
        "{:.2f} ms of its {:.2f})\n",
        100.0 * achieved / peak_gflops, achieved, 100.0 * at_peak_ms / step_ms, gemm_flops / 1e9, at_peak_ms,
        step_ms);
    // NMT_CPU_ISA lowers nmt's own kernels, the peak's among them, not the
    // libraries' (bench/avx2_env.sh holds those too).
    if (achieved > peak_gflops)
      s += "(over 100%: the products ran wider instructions than nmt's kernels, which NMT_CPU_ISA lowers alone; "
           "bench/avx2_env.sh holds every library to AVX2)\n";
  }
  return s;
}

std::string format_roofline(const std::vector<OpTime>& ops, const std::vector<GemmTime>& gemms, int64_t steps,
                            double wall_ms, double plain_ms, bool bf16) {
  const double per_step = 1.0 / static_cast<double>(std::max<int64_t>(steps, 1));
  std::string s = "\nroofline account of a step (" + std::string(bf16 ? "bf16" : "float32") + " matrix multiplies):\n";
  std::map<std::string, double> by_class;
  double all = 0;
  for (const OpTime& t : ops) by_class[op_class(t.name)] += t.self_ms, all += t.self_ms;
  by_class["outside any op"] = std::max(0.0, wall_ms - all);
  std::vector<std::pair<std::string, double>> classes(by_class.begin(), by_class.end());
  std::sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  s += fmt::format("{:<28} {:>10} {:>8}\n", "op class (self time)", "ms/step", "share");
  for (const auto& [name, ms] : classes)
    s += fmt::format("{:<28} {:>10.2f} {:>7.1f}%\n", name, ms * per_step, 100.0 * ms / wall_ms);

  s += fmt::format("\n{:<14} {:>22} {:>10} {:>9} {:>9} {:>12} {:>7}\n", "GEMM", "[batch x] m x k . k x n",
                   "calls/step", "ms/step", "GFLOP/s", "alone GFLOP/s", "share");
  double flops = 0, ms = 0, ideal_ms = 0;
  const size_t kShown = 25;  // the rows printed, largest time first; the sums take every shape
  for (size_t i = 0; i < gemms.size(); ++i) {
    const GemmTime& g = gemms[i];
    const double achieved = g.flops() / (g.self_ms / 1e3) / 1e9;
    const double peak = gemm_peak_gflops(g, bf16);
    flops += g.flops(), ms += g.self_ms, ideal_ms += g.flops() / (peak * 1e9) * 1e3;
    if (i >= kShown) continue;
    const std::string shape = (g.batch > 1 ? std::to_string(g.batch) + " x " : std::string()) + std::to_string(g.m) +
                              "x" + std::to_string(g.k) + " . " + std::to_string(g.k) + "x" + std::to_string(g.n);
    s += fmt::format("{:<14} {:>22} {:>10.1f} {:>9.2f} {:>9.1f} {:>12.1f} {:>6.0f}%\n", g.op, shape,
                     static_cast<double>(g.calls) * per_step, g.self_ms * per_step, achieved, peak,
                     100.0 * achieved / peak);
  }
  if (gemms.size() > kShown) s += fmt::format("... {} more shapes\n", gemms.size() - kShown);
  if (ms > 0) {
    s += fmt::format(
        "all GEMMs: {:.2f} GFLOP a step in {:.2f} ms, {:.1f} GFLOP/s: {:.0f}% of what their shapes reach alone "
        "({:.2f} ms)\n",
        flops * per_step / 1e9, ms * per_step, flops / (ms / 1e3) / 1e9, 100.0 * ideal_ms / ms, ideal_ms * per_step);
    s += fmt::format(
        "the step: {:.2f} ms without the profiler; its GEMM roofline (its GEMMs at their shapes' speed alone, "
        "nothing else) {:.2f} ms: the step at {:.0f}% of its GEMM roofline\n",
        plain_ms * per_step, ideal_ms * per_step, 100.0 * ideal_ms / plain_ms);
  }
  s += format_arithmetic_peak(flops * per_step, ms * per_step, plain_ms * per_step, bf16,
                              ops::cpu::arithmetic_peak_gflops(bf16), at::get_num_threads());
  s += fmt::format("memory: a 256 MiB copy moves {:.1f} GB/s (read + write), the roof of the memory-bound classes\n",
                   stream_gbps());
  return s;
}

}  // namespace nmt
