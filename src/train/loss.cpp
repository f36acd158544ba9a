#include "train/loss.h"

#include <ATen/ATen.h>

#include "tokenizer/special_ids.h"

namespace nmt {

at::Tensor token_loss_sum(const at::Tensor& logits, const at::Tensor& labels, double smoothing) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}), {},
                                at::Reduction::Sum, kPadId, smoothing);
}

}  // namespace nmt
