// Residual add with dropout fused with the LayerNorm after it (the pattern
// every pre-LayerNorm block repeats):
//   sum  = x + dropout(y)      (x when y is undefined)
//   norm = LayerNorm(sum) * gamma + beta
// CPU tensors take the fused kernel (cpu/add_layer_norm_cpu.h); others the
// composite, which is also the tests' reference.
#pragma once

#include <ATen/core/Tensor.h>

#include "ops/random/dropout.h"

namespace nmt::ops {

struct AddLayerNormOutput {
  at::Tensor sum;   // sum: [B, T, C], x's dtype (undefined when y is)
  at::Tensor norm;  // norm: [B, T, C], norm_dtype
};

// x: [B, T, C] float or double (the residual stream); y: [B, T, C] in x's
// dtype or bf16, or undefined; gamma, beta: [C] in x's dtype. norm_dtype:
// x's dtype, or bf16 for a bf16 matrix multiply after it.
AddLayerNormOutput add_layer_norm(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gamma,
                                  const at::Tensor& beta, double eps, const Dropout& dropout,
                                  at::ScalarType norm_dtype);

// The same from unfused LibTorch ops (differentiable by LibTorch's autograd).
AddLayerNormOutput add_layer_norm_reference(const at::Tensor& x, const at::Tensor& y,
                                            const at::Tensor& gamma, const at::Tensor& beta,
                                            double eps, const Dropout& dropout,
                                            at::ScalarType norm_dtype);

}  // namespace nmt::ops
