// Adam over one flat buffer of parameters. The constructor moves every
// parameter into a single contiguous buffer (the parameters become views of
// it) and gives each a gradient that is a view of a second buffer, which
// autograd accumulates into in place. Zeroing, the gradient norm, gradient
// all-reduce (train/gradient_sync.h) and the update are then one pass each
// over contiguous memory instead of a few ops per parameter tensor.
// CPU: the fused kernel (cpu/adam_cpu.h); a GPU: one CUDA kernel
// (cuda/adam_kernel.h); other devices: LibTorch ops on the flat buffers (the
// same arithmetic).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nmt::ops {

struct AdamHyper {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
};

class FlatAdam {
 public:
  FlatAdam(std::vector<at::Tensor> params, AdamHyper hyper);

  // Zeros every gradient (one fill of the flat gradient buffer).
  void zero_grad();
  // The flat gradient buffer: [P] (contiguous; padding between parameters stays 0).
  const at::Tensor& flat_grad() const { return grad_; }
  const at::Tensor& flat_param() const { return param_; }
  at::Tensor& flat_param() { return param_; }
  // sqrt(sum of squared gradients), 0-dim, on the parameters' device.
  at::Tensor grad_norm() const;
  // One update with learning rate lr; gradients are multiplied by grad_scale
  // (a 0-dim tensor, e.g. the clipping factor) first.
  void step(double lr, const at::Tensor& grad_scale);
  int64_t steps() const { return steps_; }
  // The moments, for copying between ranks; set_steps with them.
  at::Tensor& exp_avg() { return exp_avg_; }
  at::Tensor& exp_avg_sq() { return exp_avg_sq_; }
  void set_steps(int64_t steps) { steps_ = steps; }

  // The state a checkpoint keeps: moments and the step count.
  void save(const std::string& path) const;
  // InputError naming the file when it does not fit these parameters.
  void load(const std::string& path);
  // The same from save()'s bytes, read elsewhere; `source` names them in errors.
  void load_bytes(const std::string& bytes, const std::string& source);

 private:
  std::vector<at::Tensor> params_;
  AdamHyper hyper_;
  at::Tensor param_, grad_, exp_avg_, exp_avg_sq_;  // [P] each
  int64_t steps_ = 0;
};

}  // namespace nmt::ops
