// The feed-forward block's middle, fused: out = dropout(relu(h + bias)).
// The backward needs no mask: out > 0 exactly where the element was kept and
// positive, so dh = dout * (out > 0) / (1 - p).
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
// T: bias and its gradient (float or double); U: h and out (T or bf16).
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/cpu_isa.h"
#include "ops/activation/bias_relu_dropout_params.h"
#include "ops/random/philox.h"

namespace nmt::ops::cpu {

using ops::BiasReluDropoutParams;
using ops::BiasReluDropoutBackwardParams;

#define NMT_DECLARE_BIAS_RELU_DROPOUT_KERNELS(isa)                                   \
  namespace isa {                                                                    \
  template <typename T, typename U>                                                  \
  void bias_relu_dropout_forward(const BiasReluDropoutParams<T, U>& p);             \
  template <typename T, typename U>                                                  \
  void bias_relu_dropout_backward(const BiasReluDropoutBackwardParams<T, U>& p);    \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_BIAS_RELU_DROPOUT_KERNELS)
#undef NMT_DECLARE_BIAS_RELU_DROPOUT_KERNELS

template <typename T, typename U>
void bias_relu_dropout_forward(const BiasReluDropoutParams<T, U>& p) {
  NMT_CPU_DISPATCH(bias_relu_dropout_forward, p);
}
template <typename T, typename U>
void bias_relu_dropout_backward(const BiasReluDropoutBackwardParams<T, U>& p) {
  NMT_CPU_DISPATCH(bias_relu_dropout_backward, p);
}

}  // namespace nmt::ops::cpu
