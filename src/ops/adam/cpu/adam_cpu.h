// Adam over flat buffers: every parameter of the model lives in one
// contiguous buffer (and its gradient, first and second moments in three
// more), so a step is one pass over memory instead of several small ops per
// parameter tensor. The arithmetic and its order follow torch::optim::Adam
// (L2 weight decay added to the gradient, bias-corrected moments), so the
// two agree to rounding. The gradient clipping factor is applied on the fly,
// and the weights' moving average (AdamParams::ema), when one is kept, is
// updated from the new weights in the same pass.
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
#pragma once

#include <cstdint>

#include "ops/adam/adam_params.h"
#include "ops/cpu_isa.h"

namespace nmt::ops::cpu {

using ops::AdamParams;

#define NMT_DECLARE_ADAM_KERNELS(isa)                                  \
  namespace isa {                                                      \
  template <typename T>                                                \
  void adam_step(const AdamParams<T>& p);                              \
  template <typename T>                                                \
  double sum_of_squares(const T* x, int64_t count);                    \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_ADAM_KERNELS)
#undef NMT_DECLARE_ADAM_KERNELS

template <typename T>
void adam_step(const AdamParams<T>& p) {
  NMT_CPU_DISPATCH(adam_step, p);
}
// sum x^2 (accumulated in double), for the gradient norm.
template <typename T>
double sum_of_squares(const T* x, int64_t count) {
  NMT_CPU_DISPATCH(sum_of_squares, x, count);
}

}  // namespace nmt::ops::cpu
