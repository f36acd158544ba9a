#include "train/train_step.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "ops/linear/dense.h"
#include "train/loss.h"

namespace nmt {

TrainStep::TrainStep(Transformer model, const TrainConfig& config, c10::Device device,
                     std::shared_ptr<GradientSync> sync)
    : model_(std::move(model)),
      config_(config),
      device_(device),
      sync_(std::move(sync)),
      optimizer_(model_->parameters(),
                 ops::AdamHyper{config.adam_beta1, config.adam_beta2, config.adam_eps,
                                config.weight_decay}) {
  sync_->attach(optimizer_.flat_grad(), model_->parameters());
  attach_side_copy();
  if (config.ema_decay > 0) optimizer_.enable_ema(config.ema_decay, config.ema_step_dependent);
}

void TrainStep::attach_side_copy() {
  const at::Tensor& flat = optimizer_.flat_param();
  const at::ScalarType side = model_->matmul_dtype();
  if (side == flat.scalar_type() || !ops::dense_applies(at::empty({0}, flat.options().dtype(side)), flat)) return;
  side_copy_ = at::empty(flat.sizes(), flat.options().dtype(side));
  // A parameter's copy sits at its offset in the flat buffer.
  const auto copy_of = [&](const at::Tensor& p) {
    const int64_t offset = (static_cast<const char*>(p.data_ptr()) - static_cast<const char*>(flat.data_ptr())) /
                           static_cast<int64_t>(flat.element_size());
    return side_copy_.narrow(0, offset, p.numel()).view(p.sizes());
  };
  for (const auto& m : model_->modules(/*include_self=*/false))
    if (auto* dense = dynamic_cast<DenseImpl*>(m.get())) {
      dense->weight_side = copy_of(dense->weight);
      if (dense->bias.defined()) dense->bias_side = copy_of(dense->bias);
    }
}

void TrainStep::broadcast_state() {
  if (sync_->world_size() == 1) return;
  at::NoGradGuard no_grad;
  sync_->broadcast(optimizer_.flat_param(), 0);
  sync_->broadcast(optimizer_.exp_avg(), 0);
  sync_->broadcast(optimizer_.exp_avg_sq(), 0);
  if (optimizer_.has_ema()) sync_->broadcast(optimizer_.flat_ema(), 0);
  at::Tensor steps = at::scalar_tensor(sync_->rank() == 0 ? optimizer_.steps() : 0, at::kDouble);
  std::vector<at::Tensor> v{steps};
  sync_->sum(v);
  optimizer_.set_steps(static_cast<int64_t>(v[0].item<double>()));
}

namespace {

// Test hook: NMT_TEST_NONFINITE_AT=STEP poisons that step's loss with NaN.
bool poison_step(int64_t step) {
  static const long long at = [] {
    const char* v = std::getenv("NMT_TEST_NONFINITE_AT");
    return v ? std::atoll(v) : -1;
  }();
  return at == step;
}

}  // namespace

StepOutput TrainStep::run(const StepBatch& sb, int64_t step, double lr, const std::vector<double>& votes) {
  // Dropout masks are drawn from (seed, step, global row): the same whatever
  // the number of ranks, and again after a resume.
  model_->set_dropout_step(config_.seed, step, sb.first_row);
  // The weights as this step sees them (a resume or a broadcast may have
  // written them since the last step).
  if (side_copy_.defined()) side_copy_.copy_(optimizer_.flat_param());
  sync_->note_step(step);
  optimizer_.zero_grad();
  // The loss of this rank's rows divided by the tokens of the whole global
  // batch: summed over ranks, gradients and loss equal one process's.
  at::Tensor loss = at::zeros({}, optimizer_.flat_param().options());
  at::Tensor nll = at::zeros({}, optimizer_.flat_param().options());
  sync_->before_backward();
  if (sb.batch.src.size(0) > 0) {
    loss = token_loss_sum(model_, sb.batch.to(device_), config_.label_smoothing, &nll) /
           static_cast<double>(sb.global_tokens);
    nll = nll.to(loss.scalar_type()) / static_cast<double>(sb.global_tokens);
    if (poison_step(step)) loss = loss * std::nan("");
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
    optimizer_.step(lr, coef);
  }
  // One small all-reduce: the global losses and the votes.
  std::vector<at::Tensor> reduced{at::stack({loss.detach(), nll.detach()})};
  if (!votes.empty()) reduced.push_back(at::tensor(votes, at::kDouble));
  sync_->sum(reduced);
  out.loss = reduced[0][0];
  out.nll = reduced[0][1];
  if (!votes.empty()) {
    const at::Tensor v = reduced[1].to(at::kCPU, at::kDouble).contiguous();
    out.votes.assign(v.data_ptr<double>(), v.data_ptr<double>() + v.numel());
  }
  return out;
}

}  // namespace nmt
