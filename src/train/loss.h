// The training objective, in one place: label-smoothed token cross-entropy
// with padding ignored. Training divides the sum by the global batch's
// target tokens; validation (smoothing 0) by the validation tokens.
#pragma once

#include <ATen/core/Tensor.h>

namespace nmt {

// logits: [B, T, V], labels: [B, T] (kPadId = ignored) -> 0-dim tensor:
// the sum over non-pad positions of (1 - s)·(-log p[label]) + s·mean_v(-log p[v]).
at::Tensor token_loss_sum(const at::Tensor& logits, const at::Tensor& labels, double smoothing);

}  // namespace nmt
