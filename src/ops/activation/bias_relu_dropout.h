// The feed-forward block's middle: dropout(relu(h + bias)), fused on CPU
// (cpu/bias_relu_dropout_cpu.h), composite elsewhere and as the reference.
#pragma once

#include <ATen/core/Tensor.h>

#include "ops/random/dropout.h"

namespace nmt::ops {

// h: [B, T, F] (float, double or bf16), bias: [F] (float or double) -> [B, T, F] in h's dtype.
at::Tensor bias_relu_dropout(const at::Tensor& h, const at::Tensor& bias, const Dropout& dropout);
at::Tensor bias_relu_dropout_reference(const at::Tensor& h, const at::Tensor& bias,
                                       const Dropout& dropout);

}  // namespace nmt::ops
