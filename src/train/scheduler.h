// Every "when" of a training run, in one place (as Marian's
// training/scheduler.h): the learning rate of a step, which steps close a
// logged window, which end with a validation and a save, and when the run
// stops (train.max_steps, max_epochs, max_minutes, patience,
// stop_at_bleu). The trainer asks it after each step and after each
// validation; nothing else in train/ reads these keys.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "checkpoint/state.h"
#include "config/config.h"
#include "train/validators.h"

namespace nmt {

// Learning rate at a 1-based step: linear warm-up to t.lr over
// t.warmup_steps, then inverse-square-root decay.
double learning_rate(const TrainConfig& t, int64_t step);

class Scheduler {
 public:
  // lower_is_better: the direction of train.best_metric; `state` carries a
  // resumed run's early-stopping record (its best value and count).
  Scheduler(const TrainConfig& config, bool lower_is_better, const TrainingState& state);

  double learning_rate(int64_t step) const { return nmt::learning_rate(config_, step); }
  // The steps that close a window of the training log (train.log_every).
  bool logs_after(int64_t step) const { return step % config_.log_every == 0; }
  // train.max_steps or train.max_epochs reached by `state`.
  bool counts_reached(const TrainingState& state) const;
  // train.max_minutes of wall time spent, by this rank's clock (the ranks
  // vote on it, so that they stop at the same step).
  bool out_of_time(double wall_minutes) const;
  // Whether the step just taken ends with a validation and a save: every
  // train.eval_every steps, and the last step of the run.
  bool validates_after(int64_t step, bool last) const { return last || step % config_.eval_every == 0; }

  struct Verdict {
    bool best = false;  // a new best value of train.best_metric
    bool stop = false;  // patience spent, or train.stop_at_bleu reached
    std::string why;    // the log line for a stop
  };
  // After a validation: updates the best-so-far record and says whether the
  // run stops. `metrics` must hold train.best_metric.
  Verdict validated(const std::map<std::string, double>& metrics);
  double best() const { return stopping_.best(); }
  int64_t evals_since_best() const { return stopping_.evals_since_best(); }

 private:
  TrainConfig config_;
  EarlyStopping stopping_;
};

}  // namespace nmt
