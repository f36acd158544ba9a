// Adam over one flat buffer of parameters. The constructor moves every
// parameter into a single contiguous buffer (the parameters become views of
// it) and gives each a gradient that is a view of a second buffer, which
// autograd accumulates into in place. Zeroing, the gradient norm, gradient
// all-reduce (train/gradient_sync.h) and the update are then one pass each
// over contiguous memory instead of a few ops per parameter tensor.
// CPU: the fused kernel (cpu/adam_cpu.h); a GPU: one CUDA kernel
// (cuda/adam_kernel.h); other devices: LibTorch ops on the flat buffers (the
// same arithmetic).
//
// It can also keep an exponential moving average of the weights (Polyak
// averaging; Marian's --exponential-smoothing) in a third flat buffer beside
// them, updated by every step: on the CPU in the Adam pass itself, elsewhere
// by one lerp_ over the flat buffers. Training goes on from the raw weights;
// swap_ema() puts the average in their place for validation and saving.
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

  // From now on every step also updates the moving average of the weights
  // with decay ema_decay_at(decay, step_dependent, step) (adam_params.h),
  // starting from the weights as they are. decay in (0, 1).
  void enable_ema(double decay, bool step_dependent);
  bool has_ema() const { return ema_.defined(); }
  // The average: [P], laid out as flat_param(); undefined without one. While
  // swapped (swap_ema), the raw weights.
  const at::Tensor& flat_ema() const { return ema_; }
  at::Tensor& flat_ema() { return ema_; }
  // The average starts again from the weights as they are (a resume: the
  // checkpoint's model weights are its average).
  void reset_ema();
  // Exchanges the contents of the weights and their average (nothing
  // without one): the parameters, views of the flat buffer, then hold the
  // average. Twice, everything is as it was, bit for bit. No step may run
  // while swapped.
  void swap_ema();
  bool ema_swapped() const { return ema_swapped_; }

  // The state a checkpoint keeps: moments and the step count, and with an
  // average the raw weights too (the checkpoint's model weights are then the
  // average, for inference; training resumes from the raw ones).
  void save(const std::string& path) const;
  // InputError naming the file when it does not fit these parameters. Raw
  // weights saved with an average replace the flat parameters.
  void load(const std::string& path);
  // The same from save()'s bytes, read elsewhere; `source` names them in errors.
  void load_bytes(const std::string& bytes, const std::string& source);

 private:
  std::vector<at::Tensor> params_;
  AdamHyper hyper_;
  at::Tensor param_, grad_, exp_avg_, exp_avg_sq_;  // [P] each
  int64_t steps_ = 0;
  at::Tensor ema_;  // [P], or undefined: no average kept
  double ema_decay_ = 0;
  bool ema_step_dependent_ = false;
  bool ema_swapped_ = false;  // param_ holds the average, ema_ the raw weights
};

// While alive, the optimizer's parameters hold the weights' average (when it
// keeps one): for validating and saving what inference will use.
class AveragedWeights {
 public:
  explicit AveragedWeights(FlatAdam& optimizer) : optimizer_(optimizer) { optimizer_.swap_ema(); }
  ~AveragedWeights() { optimizer_.swap_ema(); }
  AveragedWeights(const AveragedWeights&) = delete;
  AveragedWeights& operator=(const AveragedWeights&) = delete;

 private:
  FlatAdam& optimizer_;
};

}  // namespace nmt::ops
