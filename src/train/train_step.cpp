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
      optimizer_(model_->parameters(),
                 ops::AdamHyper{config.adam_beta1, config.adam_beta2, config.adam_eps,
                                config.weight_decay}) {
  sync_->attach(optimizer_.flat_grad());
}

StepOutput TrainStep::run(const StepBatch& sb, int64_t step) {
  // Dropout masks are drawn from (seed, step, global row): the same whatever
  // the number of ranks, and again after a resume.
  model_->set_dropout_step(config_.seed, step, sb.first_row);
  optimizer_.zero_grad();
  // The loss of this rank's rows divided by the tokens of the whole global
  // batch: summed over ranks, gradients and loss equal one process's.
  at::Tensor loss = at::zeros({}, optimizer_.flat_param().options());
  sync_->before_backward();
  if (sb.batch.src.size(0) > 0) {
    loss = token_loss_sum(model_, sb.batch.to(device_), config_.label_smoothing) /
           static_cast<double>(sb.global_tokens);
    loss.backward();
  }
  sync_->after_backward();

  StepOutput out;
  out.grad_norm = optimizer_.grad_norm();
  // A non-finite gradient would poison every weight: the update is skipped
  // and the caller decides what to do (one scalar read per step).
  out.updated = std::isfinite(out.grad_norm.item<double>());
  if (out.updated) {
    const at::Tensor coef = config_.clip_norm > 0
                                ? (config_.clip_norm / (out.grad_norm + 1e-6)).clamp_max(1.0)
                                : at::ones({}, out.grad_norm.options());
    optimizer_.step(learning_rate(config_, step), coef);
  }
  std::vector<at::Tensor> reduced{loss.detach().clone()};
  sync_->sum(reduced);
  out.loss = reduced[0];
  return out;
}

}  // namespace nmt
