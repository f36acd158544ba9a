// One optimizer update: forward, loss, backward, gradient synchronisation,
// clipping, learning rate and optimizer step, for one rank's share of a
// global batch.
#pragma once

#include <memory>
#include <vector>

#include "config/config.h"
#include "data/batch_source.h"
#include "model/transformer.h"
#include "ops/adam/flat_adam.h"
#include "train/gradient_sync.h"

namespace nmt {

struct StepOutput {
  at::Tensor loss;       // 0-dim: mean token loss of the whole global batch (all ranks)
  at::Tensor nll;        // 0-dim: the same without label smoothing (comparable with the validation loss)
  at::Tensor grad_norm;  // 0-dim: global gradient norm before clipping
  bool updated = true;   // false: the gradient was not finite and the update was skipped
  std::vector<double> votes;  // the votes passed to run(), summed over the ranks
};

class TrainStep {
 public:
  // The model must be on `device` already: its parameters move into the
  // optimizer's flat buffer here. With config.ema_decay > 0 the optimizer
  // keeps the weights' moving average (ops/adam/flat_adam.h).
  TrainStep(Transformer model, const TrainConfig& config, c10::Device device,
            std::shared_ptr<GradientSync> sync);

  // Takes update number `step` (1-based) on b at learning rate `lr` (the
  // Scheduler's for that step). The loss stays a tensor:
  // reading it is the caller's choice. votes: this rank's say on decisions
  // all ranks must take together (e.g. stop: time is up, a signal came);
  // they are summed over the ranks with the loss, in one all-reduce.
  StepOutput run(const StepBatch& b, int64_t step, double lr, const std::vector<double>& votes = {});

  // Copies rank 0's weights and optimizer state to every rank (after a
  // resume, which only rank 0 reads; and at the start, for certainty).
  void broadcast_state();

  ops::FlatAdam& optimizer() { return optimizer_; }
  GradientSync& sync() { return *sync_; }

 private:
  void attach_side_copy();

  Transformer model_;
  TrainConfig config_;
  c10::Device device_;
  std::shared_ptr<GradientSync> sync_;
  ops::FlatAdam optimizer_;
  // bf16 training on a GPU: a bf16 copy of the flat parameter buffer,
  // refreshed at the start of every step (one cast of every weight instead
  // of one per dense layer per forward), which the dense layers' products
  // read (DenseImpl::weight_side). Undefined otherwise.
  at::Tensor side_copy_;
};

}  // namespace nmt
