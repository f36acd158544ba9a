// The training objective, in one place: label-smoothed token cross-entropy
// of the teacher-forced decoder, padding ignored, summed over the target
// tokens (the model forms it without [B, T, V] logits: ops/cross_entropy).
// Training divides the sum by the global batch's target tokens; validation
// (smoothing 0) by the validation tokens.
#pragma once

#include <ATen/core/Tensor.h>

#include "data/dataset.h"
#include "model/transformer.h"

namespace nmt {

// b on the model's device -> 0-dim tensor: the sum over non-pad labels of
// (1 - s)·(-log p[label]) + s·mean_v(-log p[v]). nll_sum (optional): the
// sum of -log p[label] alone, from the same pass, not differentiable.
at::Tensor token_loss_sum(Transformer& model, const Batch& b, double smoothing, at::Tensor* nll_sum = nullptr);

}  // namespace nmt
