// The label-smoothed cross-entropy's parameters (cpu/cross_entropy_cpu.h,
// cuda/cross_entropy_kernel.h), for every device.
#pragma once

#include <cstdint>

#include "ops/bf16.h"

namespace nmt::ops {

template <typename T, typename U>
struct CrossEntropyParams {
  const U* logits;        // logits: [R, V], rows logits_stride apart
  const int64_t* labels;  // labels: [R]
  U* grad;                // grad: [R, V], contiguous (written when non-null)
  T* loss;                // loss: [R] (written)
  T* nll;                 // nll: [R], lse - z_y, the loss without smoothing (written when non-null)
  int64_t rows, classes, logits_stride;
  int64_t ignore_index;
  double smoothing;
};

}  // namespace nmt::ops
