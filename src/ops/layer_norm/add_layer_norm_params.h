// The fused residual add + LayerNorm's parameters (cpu/add_layer_norm_cpu.h,
// cuda/add_layer_norm_kernel.h): plain pointers and sizes, one struct per
// pass for every device.
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/random/philox.h"

namespace nmt::ops {

template <typename T, typename U>
struct AddLayerNormForwardParams {
  const T* x;      // x: [N, C], contiguous
  const U* y;      // y: [N, C], contiguous, or null
  const T* gamma;  // gamma: [C]
  const T* beta;   // beta: [C]
  T* s;            // s: [N, C] (written; may be null when y is null, then s = x)
  U* n;            // n: [N, C] (written)
  T* mean;         // mean: [N] (written)
  T* rstd;         // rstd: [N] = 1 / sqrt(var + eps) (written)
  int64_t rows;       // N = batch rows * positions
  int64_t channels;   // C
  int64_t positions;  // row r is batch row r / positions, position r % positions (dropout coordinates)
  double eps;
  philox::DropoutStream dropout;  // p = 0: none
  // y_bias: [C], added to every row of y before the dropout (the bias of the
  // product y is; the CPU kernels only), or null
  const T* y_bias;
};

template <typename T, typename U>
struct AddLayerNormBackwardParams {
  const T* s;      // s: [N, C] from the forward (x when there was no y)
  const T* mean;   // mean: [N]
  const T* rstd;   // rstd: [N]
  const T* gamma;  // gamma: [C]
  const U* dn;     // dn: [N, C], gradient of n
  const T* ds;     // ds: [N, C], gradient of s from its other uses, or null
  T* dx;           // dx: [N, C] = ds + dLayerNorm (written)
  U* dy;           // dy: [N, C] = dx * dropout mask (written; null when there was no y)
  T* dgamma;       // dgamma: [C] (written)
  T* dbeta;        // dbeta: [C] (written)
  int64_t rows, channels, positions;
  philox::DropoutStream dropout;
  T* dy_bias;  // dy_bias: [C] = dy summed over the rows (written; the CPU kernels only), or null
};

}  // namespace nmt::ops
