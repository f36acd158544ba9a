// Adam's parameters over flat buffers (cpu/adam_cpu.h, cuda/adam_kernel.h),
// for every device.
#pragma once

#include <cstdint>

namespace nmt::ops {

template <typename T>
struct AdamParams {
  T* param;          // param: [P] (updated)
  const T* grad;     // grad: [P]
  T* exp_avg;        // exp_avg: [P] (updated)
  T* exp_avg_sq;     // exp_avg_sq: [P] (updated)
  int64_t count;     // P
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;      // 1-based, for the bias corrections
  double grad_scale; // gradients are multiplied by this first (clipping)
};

}  // namespace nmt::ops
