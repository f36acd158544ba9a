// Residual add with dropout, fused with the LayerNorm that follows it:
//   s = x + dropout(y)          (the residual stream; s = x when y is absent)
//   n = (s - mean(s)) * rstd(s) * gamma + beta
// one pass over each row instead of five (dropout, add, mean, var, affine).
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
//
// T: the residual stream and statistics (float or double). U: the sublayer
// side, y and n (T, or bf16 when matrix multiplies run in bf16).
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/cpu_isa.h"
#include "ops/layer_norm/add_layer_norm_params.h"
#include "ops/random/philox.h"

namespace nmt::ops::cpu {

using ops::AddLayerNormForwardParams;
using ops::AddLayerNormBackwardParams;

#define NMT_DECLARE_ADD_LAYER_NORM_KERNELS(isa)                                   \
  namespace isa {                                                                 \
  template <typename T, typename U>                                               \
  void add_layer_norm_forward(const AddLayerNormForwardParams<T, U>& p);         \
  template <typename T, typename U>                                               \
  void add_layer_norm_backward(const AddLayerNormBackwardParams<T, U>& p);       \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_ADD_LAYER_NORM_KERNELS)
#undef NMT_DECLARE_ADD_LAYER_NORM_KERNELS

template <typename T, typename U>
void add_layer_norm_forward(const AddLayerNormForwardParams<T, U>& p) {
  NMT_CPU_DISPATCH(add_layer_norm_forward, p);
}
template <typename T, typename U>
void add_layer_norm_backward(const AddLayerNormBackwardParams<T, U>& p) {
  NMT_CPU_DISPATCH(add_layer_norm_backward, p);
}

}  // namespace nmt::ops::cpu
