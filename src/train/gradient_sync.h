// Where the gradients of several ranks meet. TrainStep calls it around the
// backward pass; one process needs no synchronisation (LocalSync).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace nmt {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual int64_t rank() const { return 0; }
  virtual int64_t world_size() const { return 1; }
  // The flat gradient buffer every parameter's gradient is a view of
  // (ops/adam/flat_adam.h); reductions work on slices of it.
  virtual void attach(const at::Tensor& flat_grad) {}
  // Before backward: the gradients about to be produced (e.g. arms hooks that
  // start reducing a bucket as soon as its gradients are complete).
  virtual void before_backward() {}
  // After backward: every gradient holds the sum over all ranks.
  virtual void after_backward() {}
  // Sums small tensors (loss, flags) over all ranks, in place.
  virtual void sum(std::vector<at::Tensor>& tensors) {}
};

class LocalSync final : public GradientSync {};

}  // namespace nmt
