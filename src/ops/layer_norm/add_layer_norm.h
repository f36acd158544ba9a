// Residual add with dropout fused with the LayerNorm after it (the pattern
// every pre-LayerNorm block repeats):
//   sum  = x + dropout(y + y_bias)   (x when y is undefined)
//   norm = LayerNorm(sum) * gamma + beta
// y_bias, the bias of the product y is, comes here on the CPU: adding it
// in the product wrote every row of y once more, and its gradient (dy
// summed over the rows) was one more pass over dy.
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
// x's dtype, or bf16 for a bf16 matrix multiply after it. y_bias: [C] in
// x's dtype, or undefined (off the CPU it is added to y before the kernel).
AddLayerNormOutput add_layer_norm(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gamma,
                                  const at::Tensor& beta, double eps, const Dropout& dropout,
                                  at::ScalarType norm_dtype, const at::Tensor& y_bias = {});

// The same from unfused LibTorch ops (differentiable by LibTorch's autograd).
AddLayerNormOutput add_layer_norm_reference(const at::Tensor& x, const at::Tensor& y,
                                            const at::Tensor& gamma, const at::Tensor& beta,
                                            double eps, const Dropout& dropout,
                                            at::ScalarType norm_dtype, const at::Tensor& y_bias = {});

}  // namespace nmt::ops
