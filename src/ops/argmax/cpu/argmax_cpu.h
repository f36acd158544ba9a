// The index of each row's largest value, as torch.argmax picks it: the
// first of equal maxima, and the first NaN where a row has one. Greedy
// decoding takes one per row and step over the whole vocabulary; a scalar
// loop with its NaN test per element took 1.7% of the service's CPU time at
// concurrency 32 (this, 0.4%).
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
#pragma once

#include <cstdint>

#include "ops/cpu_isa.h"

namespace nmt::ops::cpu {

struct ArgmaxParams {
  const float* x;  // x: [rows, cols], rows `stride` floats apart
  int64_t* out;    // out: [rows] (written)
  int64_t rows, cols, stride;  // cols >= 1
};

#define NMT_DECLARE_ARGMAX_KERNELS(isa) \
  namespace isa {                       \
  void argmax_rows(const ArgmaxParams& p); \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_ARGMAX_KERNELS)
#undef NMT_DECLARE_ARGMAX_KERNELS

inline void argmax_rows(const ArgmaxParams& p) { NMT_CPU_DISPATCH(argmax_rows, p); }

}  // namespace nmt::ops::cpu
