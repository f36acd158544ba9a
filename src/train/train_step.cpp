#include "train/train_step.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "train/loss.h"

namespace nmt {

double learning_rate(const TrainConfig& t, int64_t step) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double w = static_cast<double>(t.warmup_steps);
  return t.lr * std::min(s / w, std::sqrt(w / s));
}

TrainStep::TrainStep(Transformer model, const TrainConfig& config, c10::Device device,
                     std::shared_ptr<GradientSync> sync)
    : model_(std::move(model)),
      config_(config),
      device_(device),
      sync_(std::move(sync)),
      params_(model_->parameters()),
      optimizer_(params_, torch::optim::AdamOptions(config.lr)
                              .betas({config.adam_beta1, config.adam_beta2})
                              .eps(config.adam_eps)
                              .weight_decay(config.weight_decay)) {}

StepOutput TrainStep::run(const StepBatch& sb, int64_t step) {
  for (auto& group : optimizer_.param_groups())
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(learning_rate(config_, step));
  optimizer_.zero_grad();
  for (auto& p : params_)
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);

  // The loss of this rank's rows divided by the tokens of the whole global
  // batch: summed over ranks, gradients and loss equal one process's.
  at::Tensor loss = at::zeros({}, params_.front().options());
  sync_->before_backward();
  if (sb.batch.src.size(0) > 0) {
    const Batch b = sb.batch.to(device_);
    const at::Tensor logits = model_(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);
    loss = token_loss_sum(logits, b.tgt_out, config_.label_smoothing) /
           static_cast<double>(sb.global_tokens);
    loss.backward();
  }
  sync_->after_backward();

  // Global-norm clipping without reading the norm on the host.
  std::vector<at::Tensor> squares;
  for (const auto& p : params_) squares.push_back(p.grad().pow(2).sum());
  const at::Tensor norm = at::stack(squares).sum().sqrt();
  if (config_.clip_norm > 0) {
    const at::Tensor coef = (config_.clip_norm / (norm + 1e-6)).clamp_max(1.0);
    for (auto& p : params_) p.mutable_grad().mul_(coef);
  }
  optimizer_.step();

  std::vector<at::Tensor> reduced{loss.detach().clone()};
  sync_->sum(reduced);
  return {reduced[0], norm};
}

}  // namespace nmt
