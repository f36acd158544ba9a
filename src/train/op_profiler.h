// Where a training step's time goes, per LibTorch op (and our own ops, which
// record themselves): LibTorch's profiler around some steps, summarized as
// self time per op name; and the roofline account of the step: its ops by
// class, its matrix multiplies by shape with the GFLOP/s they reached against
// what the same shapes reach alone on this machine.
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

// The matrix multiplies of one shape: [batch ×] [m, k] · [k, n].
struct GemmTime {
  std::string op;  // aten::mm, aten::addmm, aten::bmm, ...
  int64_t batch = 1, m = 0, k = 0, n = 0;
  int64_t calls = 0;
  double self_ms = 0;
  double flops() const { return 2.0 * static_cast<double>(batch * m) * static_cast<double>(k * n) * calls; }
};

class OpProfiler {
 public:
  void start();
  // Stops recording; ops sorted by self time, largest first. The matrix
  // multiplies among them, by shape, are in gemms() afterwards.
  std::vector<OpTime> stop();
  const std::vector<GemmTime>& gemms() const { return gemms_; }

 private:
  std::vector<GemmTime> gemms_;
};

// A table of the top ops: self ms per step and share of the step's wall time.
std::string format_profile(const std::vector<OpTime>& ops, int64_t steps, double wall_ms, int top);

// What an op is, for the roofline account: "matrix multiplies", "attention",
// "layer norm", "softmax / cross-entropy", "optimizer", "activation / dropout",
// "embedding", "copies and casts" or "other" (by its name).
std::string op_class(const std::string& name);

// GFLOP/s of [batch ×] [m, k] · [k, n] alone on this machine in `dtype`
// (at::kFloat or at::kBFloat16), the median of a few timed runs: the
// roofline of that shape as the step's own GEMM library reaches it.
double gemm_peak_gflops(const GemmTime& shape, bool bf16);
// GB/s of a large copy (read + write), the memory-bound ops' roof.
double stream_gbps();

// The roofline's last word: the cores' arithmetic peak (ops/linear/cpu/
// peak_cpu.h, peak_gflops measured on `threads` threads; 0: none for bf16
// here), and the GEMMs' share of it (gemm_flops in gemm_ms, a step's) and
// the step's (its GEMM flops at the peak over step_ms, unprofiled).
std::string format_arithmetic_peak(double gemm_flops, double gemm_ms, double step_ms, bool bf16, double peak_gflops,
                                   int threads);

// The roofline account of profiled steps (wall_ms under the profiler; plain_ms
// the same steps without it): time per op class, each GEMM shape's achieved
// GFLOP/s against what it reaches alone, the step's share of its GEMM
// roofline (the time its GEMMs would take at those speeds, nothing else,
// over the unprofiled step's time), and both against the cores' arithmetic
// peak (format_arithmetic_peak).
std::string format_roofline(const std::vector<OpTime>& ops, const std::vector<GemmTime>& gemms, int64_t steps,
                            double wall_ms, double plain_ms, bool bf16);

}  // namespace nmt
