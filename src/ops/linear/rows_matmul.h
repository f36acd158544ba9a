// x · w + bias for the few rows of a decoding step, without packing w
// (ops/linear/cpu/rows_matmul_cpu.h says why). Inference only: no autograd.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace nmt::ops {

// Rows up to which the model uses rows_matmul rather than OpenBLAS's GEMM.
// Measured single-threaded (as decoding runs) against addmm on the model's
// shapes: 1.1-3.6x faster up to 32 rows for [256, 768] and [1024, 256];
// for the [256, 6000] output projection 1.1-1.9x up to 16 rows, 0.91x at 32.
// Batch-32 decoding and the service's running batches stay under it, so
// both compute a sentence the same way.
inline constexpr int64_t kRowsMatmulMaxRows = 32;

// Whether rows_matmul takes these: float32 on the CPU, x [M, K] with unit
// column stride, w [K, N] contiguous, no gradient wanted.
bool rows_matmul_applies(const at::Tensor& x, const at::Tensor& w);
// x: [M, K], w: [K, N], bias: [N] or undefined -> [M, N].
at::Tensor rows_matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);
// The same in float64, the tests' reference.
at::Tensor rows_matmul_reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);

}  // namespace nmt::ops
