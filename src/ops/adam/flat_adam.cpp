#include "ops/adam/flat_adam.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/serialize.h>

#include <cmath>

#include "ops/adam/cpu/adam_cpu.h"
#include "ops/op_glue.h"
#ifdef NMT_WITH_CUDA
#include "ops/adam/cuda/adam_kernel.h"
#endif
#include "util/atomic_file.h"
#include "util/errors.h"

namespace nmt::ops {

namespace {

// The fused kernels' arguments (CPU and CUDA take the same struct); the
// caller adds what differs: the gradient scale on the CPU, the average.
template <typename T>
cpu::AdamParams<T> kernel_params(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                                 const at::Tensor& exp_avg_sq, const AdamHyper& hyper, int64_t step, double lr) {
  cpu::AdamParams<T> p{};
  p.param = param.data_ptr<T>();
  p.grad = grad.data_ptr<T>();
  p.exp_avg = exp_avg.data_ptr<T>();
  p.exp_avg_sq = exp_avg_sq.data_ptr<T>();
  p.count = param.numel();
  p.lr = lr, p.beta1 = hyper.beta1, p.beta2 = hyper.beta2, p.eps = hyper.eps;
  p.weight_decay = hyper.weight_decay;
  p.step = step;
  return p;
}

// Parameters start on 64-element boundaries: vector loads of any width stay aligned.
constexpr int64_t kAlign = 64;

int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

FlatAdam::FlatAdam(std::vector<at::Tensor> params, AdamHyper hyper)
    : params_(std::move(params)), hyper_(hyper) {
  TORCH_CHECK(!params_.empty(), "FlatAdam: no parameters");
  int64_t total = 0;
  for (const auto& p : params_) total += aligned(p.numel());
  const auto options = params_.front().options();
  param_ = at::zeros({total}, options);
  grad_ = at::zeros({total}, options);
  exp_avg_ = at::zeros({total}, options);
  exp_avg_sq_ = at::zeros({total}, options);
  at::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : params_) {
    TORCH_CHECK(p.options().dtype() == options.dtype() && p.device() == options.device(),
                "FlatAdam: parameters must share dtype and device");
    const at::Tensor slot = param_.narrow(0, offset, p.numel()).view(p.sizes());
    slot.copy_(p);
    p.set_data(slot);  // the parameter now lives in the flat buffer
    p.mutable_grad() = grad_.narrow(0, offset, p.numel()).view(p.sizes());
    offset += aligned(p.numel());
  }
}

void FlatAdam::zero_grad() { grad_.zero_(); }

at::Tensor FlatAdam::grad_norm() const {
  RECORD_FUNCTION("nmt::grad_norm", std::vector<c10::IValue>());
  if (grad_.is_cpu()) {
    double sum = 0;
    if (grad_.scalar_type() == at::kFloat)
      sum = cpu::sum_of_squares(grad_.data_ptr<float>(), grad_.numel());
    else
      sum = cpu::sum_of_squares(grad_.data_ptr<double>(), grad_.numel());
    return at::scalar_tensor(std::sqrt(sum), grad_.options());
  }
  if (glue::fused_on_cuda(grad_)) return grad_.norm();  // one reduction
  return grad_.pow(2).sum().sqrt();
}

void FlatAdam::enable_ema(double decay, bool step_dependent) {
  TORCH_CHECK(decay > 0 && decay < 1, "FlatAdam: the average's decay must be in (0, 1)");
  ema_decay_ = decay;
  ema_step_dependent_ = step_dependent;
  ema_ = at::empty_like(param_);
  reset_ema();
}

void FlatAdam::reset_ema() {
  TORCH_CHECK(!ema_swapped_, "FlatAdam: reset_ema while swapped");
  if (ema_.defined()) ema_.copy_(param_);
}

void FlatAdam::swap_ema() {
  if (!ema_.defined()) return;
  at::NoGradGuard no_grad;
  const at::Tensor raw = param_.clone();
  param_.copy_(ema_);
  ema_.copy_(raw);
  ema_swapped_ = !ema_swapped_;
}

void FlatAdam::step(double lr, const at::Tensor& grad_scale) {
  RECORD_FUNCTION("nmt::adam_step", std::vector<c10::IValue>());
  TORCH_CHECK(!ema_swapped_, "FlatAdam: a step while the average is swapped in");
  ++steps_;
  const double ema_decay = ema_decay_at(ema_decay_, ema_step_dependent_, steps_);
  if (param_.is_cpu()) {
    const double scale = grad_scale.item<double>();
    const auto run = [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      cpu::AdamParams<T> p = kernel_params<T>(param_, grad_, exp_avg_, exp_avg_sq_, hyper_, steps_, lr);
      p.grad_scale = scale;
      if (ema_.defined()) p.ema = ema_.data_ptr<T>(), p.ema_decay = ema_decay;
      cpu::adam_step(p);
    };
    if (param_.scalar_type() == at::kFloat) run(static_cast<float*>(nullptr));
    else run(static_cast<double*>(nullptr));
    return;
  }
#ifdef NMT_WITH_CUDA
  if (glue::fused_on_cuda(param_) && param_.scalar_type() == at::kFloat) {
    const cpu::AdamParams<float> p = kernel_params<float>(param_, grad_, exp_avg_, exp_avg_sq_, hyper_, steps_, lr);
    const at::Tensor scale = grad_scale.to(param_.options()).contiguous();  // stays on the GPU
    glue::launch_cuda(param_, "adam_step", [&](auto stream) {
      return cuda::adam_step(p, scale.data_ptr<float>(), stream);
    });
    if (ema_.defined()) ema_.lerp_(param_, 1 - ema_decay);  // the kernel leaves the average to LibTorch
    return;
  }
#endif
  // Elsewhere: LibTorch ops on the flat buffers, in torch::optim::Adam's order.
  at::NoGradGuard no_grad;
  at::Tensor g = grad_ * grad_scale;
  if (hyper_.weight_decay != 0) g = g.add(param_, hyper_.weight_decay);
  const double bc1 = 1 - std::pow(hyper_.beta1, static_cast<double>(steps_));
  const double bc2 = 1 - std::pow(hyper_.beta2, static_cast<double>(steps_));
  exp_avg_.mul_(hyper_.beta1).add_(g, 1 - hyper_.beta1);
  exp_avg_sq_.mul_(hyper_.beta2).addcmul_(g, g, 1 - hyper_.beta2);
  const at::Tensor denom = (exp_avg_sq_.sqrt() / std::sqrt(bc2)).add_(hyper_.eps);
  param_.addcdiv_(exp_avg_, denom, -lr / bc1);
  if (ema_.defined()) ema_.lerp_(param_, 1 - ema_decay);
}

void FlatAdam::save(const std::string& path) const {
  torch::serialize::OutputArchive archive;
  archive.write("exp_avg", exp_avg_.cpu());
  archive.write("exp_avg_sq", exp_avg_sq_.cpu());
  archive.write("step", at::scalar_tensor(steps_, at::kLong));
  if (ema_.defined()) archive.write("param", (ema_swapped_ ? ema_ : param_).cpu());
  archive.save_to(path);
}

void FlatAdam::load(const std::string& path) { load_bytes(read_file(path, "optimizer state"), path); }

void FlatAdam::load_bytes(const std::string& bytes, const std::string& path) {
  torch::serialize::InputArchive archive;
  at::Tensor m, v, step, raw;
  try {
    archive.load_from(bytes.data(), bytes.size());
    archive.read("exp_avg", m);
    archive.read("exp_avg_sq", v);
    archive.read("step", step);
    // Saved with an average only (a checkpoint of a run without one has its
    // raw weights in model.pt).
    if (archive.try_read("param", raw) && raw.sizes() != param_.sizes())
      throw InputError(path + ": raw weights of " + std::to_string(raw.numel()) + " values do not fit this model's " +
                       std::to_string(param_.numel()));
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    throw InputError(path + ": cannot load optimizer state: " + msg.substr(0, msg.find('\n')));
  }
  if (m.sizes() != exp_avg_.sizes() || v.sizes() != exp_avg_sq_.sizes() || step.numel() != 1)
    throw InputError(path + ": optimizer state of " + std::to_string(m.numel()) +
                     " values does not fit this model's " + std::to_string(exp_avg_.numel()));
  at::NoGradGuard no_grad;
  exp_avg_.copy_(m);
  exp_avg_sq_.copy_(v);
  steps_ = step.item<int64_t>();
  if (raw.defined()) (ema_swapped_ ? ema_ : param_).copy_(raw);
}

}  // namespace nmt::ops
