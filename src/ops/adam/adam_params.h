// Adam's parameters over flat buffers (cpu/adam_cpu.h, cuda/adam_kernel.h),
// for every device, and the decay of the weights' moving average.
#pragma once

#include <algorithm>
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
  // The weights' exponential moving average, updated in the same pass from
  // the new weights: ema += (1 - ema_decay) * (param - ema), LibTorch's
  // lerp_ (the CUDA path uses it). Null: no average kept (the CUDA kernel
  // never reads these).
  T* ema = nullptr;  // ema: [P] (updated)
  double ema_decay = 0;
};

// The decay the moving average takes at optimizer step `step` (1-based):
// `decay`, or with step_dependent Marian's --exponential-smoothing warm-up,
// min(decay, (1 + step) / (10 + step)), so that the first updates are not
// averaged with the initial weights for thousands of steps.
inline double ema_decay_at(double decay, bool step_dependent, int64_t step) {
  if (!step_dependent) return decay;
  const double s = static_cast<double>(step);
  return std::min(decay, (1 + s) / (10 + s));
}

}  // namespace nmt::ops
