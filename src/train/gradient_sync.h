// Where the gradients of several ranks meet. TrainStep calls it around the
// backward pass; one process needs no synchronisation (LocalSync).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

// What synchronisation cost, summed since the start.
struct SyncStats {
  int64_t steps = 0;
  double bytes = 0;         // gradient bytes all-reduced by this rank
  double wait_seconds = 0;  // time after the backward spent waiting for reductions
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual int64_t rank() const { return 0; }
  virtual int64_t world_size() const { return 1; }
  // The flat gradient buffer every parameter's gradient is a view of
  // (ops/adam/flat_adam.h), and those parameters; reductions work on slices of it.
  virtual void attach(const at::Tensor& flat_grad, const std::vector<at::Tensor>& params) {}
  // Before backward: the gradients about to be produced (e.g. arms hooks that
  // start reducing a bucket as soon as its gradients are complete).
  virtual void before_backward() {}
  // After backward: every gradient holds the sum over all ranks.
  virtual void after_backward() {}
  // Sums small tensors (loss, flags) over all ranks, in place.
  virtual void sum(std::vector<at::Tensor>& tensors) {}
  // Overwrites t with rank `root`'s t on every rank.
  virtual void broadcast(at::Tensor& t, int64_t root) {}
  // The step this rank is at (named in failure messages).
  virtual void note_step(int64_t step) {}
  // The run has ended on this rank. Rank 0, which hosts what the others
  // read, stays until every rank has said so (or the timeout passes).
  virtual void finish() {}
  // Rank 0 publishes value under key; every rank returns it (rank 0 at once,
  // the others once it is there).
  virtual std::string set_and_wait(const std::string& key, const std::string& value) { return value; }
  virtual SyncStats stats() const { return {}; }
};

class LocalSync final : public GradientSync {};

}  // namespace nmt
