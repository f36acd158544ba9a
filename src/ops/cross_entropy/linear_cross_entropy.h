// The model's output layer and its loss in one op: logits = h Wᵀ (+ b),
// then label-smoothed cross-entropy summed over the rows whose label is not
// ignore_index. On CPU the logits exist only a chunk of rows at a time: each
// chunk's loss and gradient (cpu/cross_entropy_cpu.h) are computed at once,
// and dh, dW are accumulated during the forward pass; backward only scales
// them by the incoming gradient. No [N, V] tensor is kept.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace nmt::ops {

// h: [N, C] (float, double or bf16), weight: [V, C] and bias: [V] or undefined
// (float or double; with bf16 h the product runs in bf16 and dW is summed in
// float), labels: [N] int64 -> 0-dim sum of the rows' losses, in weight's dtype.
// nll_sum (optional): the same sum without label smoothing, not
// differentiable, from the same pass (what the training chart compares with
// the validation loss).
at::Tensor linear_cross_entropy(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& labels, double smoothing, int64_t ignore_index,
                                at::Tensor* nll_sum = nullptr);
// Unfused: at::linear in h's dtype, then at::cross_entropy_loss (reduction
// Sum) in weight's.
at::Tensor linear_cross_entropy_reference(const at::Tensor& h, const at::Tensor& weight,
                                          const at::Tensor& bias, const at::Tensor& labels,
                                          double smoothing, int64_t ignore_index);

// Rows per chunk for V classes (a chunk's logits stay within about 12 MB).
int64_t cross_entropy_chunk_rows(int64_t classes);

}  // namespace nmt::ops
