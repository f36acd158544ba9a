// y = x · w + bias for a few rows of x (a decoding step: one row per
// sentence), reading w straight from memory. OpenBLAS's GEMM first copies
// (packs) the whole of w, which for a handful of rows costs as much as the
// product; here each column block of w is read once per group of rows, from
// cache after the first group. Every output element is the sum over k in
// order, so a row's result does not depend on which other rows, or how many,
// share the call (a sentence's translation does not depend on its batch).
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
#pragma once

#include <cstdint>

#include "ops/cpu_isa.h"
#include "ops/linear/cpu/panel.h"

namespace nmt::ops::cpu {

struct RowsMatmulParams {
  const float* x;     // x: [M, K], row stride x_stride
  const float* w;     // w: [K, N], row-major; or, with panels, the panel layout
  const float* bias;  // bias: [N], or nullptr
  float* y;           // y: [M, N] (written)
  int64_t rows, in, out, x_stride;  // M, K, N
  // w in panels of kPanel columns (panel.h, group 1), each [K][kPanel]
  // contiguous: a column block is
  // then one sequential stream. Row-major, its K rows are N floats apart,
  // each in another page for the output projection, and a first pass over
  // it (every step's, as the decoder's weights leave cache between uses)
  // waits on memory row by row: at 8 rows a step that took twice as long
  // per row as at 64. The same products in the same order either way.
  bool panels = false;
};

#define NMT_DECLARE_ROWS_MATMUL_KERNELS(isa) \
  namespace isa {                            \
  void rows_matmul(const RowsMatmulParams& p); \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_ROWS_MATMUL_KERNELS)
#undef NMT_DECLARE_ROWS_MATMUL_KERNELS

inline void rows_matmul(const RowsMatmulParams& p) { NMT_CPU_DISPATCH(rows_matmul, p); }

}  // namespace nmt::ops::cpu
