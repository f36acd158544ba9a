#include "train/loss.h"

namespace nmt {

at::Tensor token_loss_sum(Transformer& model, const Batch& b, double smoothing, at::Tensor* nll_sum) {
  return model->loss_sum(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths, b.tgt_out, smoothing, nll_sum);
}

}  // namespace nmt
