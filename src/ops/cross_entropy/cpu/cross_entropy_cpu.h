// Label-smoothed cross-entropy of a block of logits rows, loss and gradient
// in one go (the caller multiplies the output projection in row chunks and
// never holds all [N, V] logits). For a row with label y (rows labelled
// ignore_index give 0 and a zero gradient):
//   lse   = log sum_v exp(z_v)
//   loss  = (1 - e) (lse - z_y) + e (lse - mean_v z_v)
//   nll   = lse - z_y                  (optional: what the loss is without smoothing)
//   dz_v  = exp(z_v - lse) - e / V - (1 - e) [v == y]
// as at::cross_entropy_loss with label_smoothing e and reduction Sum.
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
// T: arithmetic (float or double); U: logits and gradient storage (T or bf16).
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/cpu_isa.h"
#include "ops/cross_entropy/cross_entropy_params.h"

namespace nmt::ops::cpu {

using ops::CrossEntropyParams;

#define NMT_DECLARE_CROSS_ENTROPY_KERNELS(isa)                   \
  namespace isa {                                                \
  template <typename T, typename U>                              \
  void cross_entropy(const CrossEntropyParams<T, U>& p);        \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_CROSS_ENTROPY_KERNELS)
#undef NMT_DECLARE_CROSS_ENTROPY_KERNELS

template <typename T, typename U>
void cross_entropy(const CrossEntropyParams<T, U>& p) {
  NMT_CPU_DISPATCH(cross_entropy, p);
}

}  // namespace nmt::ops::cpu
