// The arithmetic peak of the cores the products run on, measured: every
// thread of the OpenMP team (the one nmt's, oneDNN's and MKL's products run
// on) repeats independent multiply-adds held in registers, with no memory
// traffic, so their rate is the most any product can reach on these cores
// with the kernels' instruction set (`nmt train --profile` puts a step's
// products and the step against it: train/op_profiler.h).
//
// float32: vfmadd on the widest vectors of the kernels' instruction set
// (2 flops a lane; the generic copy has no FMA: a multiply and an add).
// bf16: vdpbf16ps (AVX512-BF16), two products and two adds a float lane,
// what oneDNN's bf16 products run on without AMX (AMX tiles are faster and
// not measured here). Plain C++, no LibTorch.
#pragma once

#include <cstdint>

#include "ops/cpu_isa.h"

namespace nmt::ops::cpu {

// Independent accumulators a thread keeps: enough to cover the multiply-add's
// latency on two units (4 cycles x 2 on current x86 cores) with room.
inline constexpr int kPeakChains = 12;

#define NMT_DECLARE_PEAK_KERNELS(isa)                                                 \
  namespace isa {                                                                     \
  int64_t peak_lanes();                                                               \
  double fma_chains(int64_t rounds, float mul, float add, float* acc);               \
  bool has_bf16_dot();                                                                \
  double bf16_dot_chains(int64_t rounds, float x, float* acc);                       \
  double arithmetic_peak_gflops(bool bf16, int samples);                              \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_PEAK_KERNELS)
#undef NMT_DECLARE_PEAK_KERNELS

// float32 lanes of the kernels' vectors (16 / 8 / 4).
inline int64_t peak_lanes() { NMT_CPU_DISPATCH(peak_lanes); }
// acc: [kPeakChains][peak_lanes()], in and out. `rounds` times, every
// accumulator becomes acc · mul + add (one rounding: a fused multiply-add
// where the instruction set has one). Returns the flops done.
inline double fma_chains(int64_t rounds, float mul, float add, float* acc) {
  NMT_CPU_DISPATCH(fma_chains, rounds, mul, add, acc);
}
// Whether bf16_dot_chains runs here: the AVX-512 copy on a CPU with AVX512-BF16.
inline bool has_bf16_dot() { NMT_CPU_DISPATCH(has_bf16_dot); }
// acc as above. `rounds` times, every accumulator lane adds the dot product
// of the bf16 pairs (x, 0) and (1, 1), x · 1 + 0 · 1, by vdpbf16ps.
// Returns the flops done (4 a lane a round), or 0 and acc untouched where
// !has_bf16_dot().
inline double bf16_dot_chains(int64_t rounds, float x, float* acc) {
  NMT_CPU_DISPATCH(bf16_dot_chains, rounds, x, acc);
}
// The team's GFLOP/s, every thread running the chains at once: the median of
// `samples` runs of about 20 ms. bf16 without has_bf16_dot(): 0.
inline double arithmetic_peak_gflops(bool bf16, int samples = 5) {
  NMT_CPU_DISPATCH(arithmetic_peak_gflops, bf16, samples);
}

}  // namespace nmt::ops::cpu
