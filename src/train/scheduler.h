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

// How far a run is through its budget, 0 to 1: the larger of step /
// train.max_steps and wall minutes / train.max_minutes (each where set), so
// whichever will end the run sets the pace; a resumed run continues from the
// steps and minutes it had. 0 without a step or time budget.
double budget_progress(const TrainConfig& t, int64_t step, double wall_minutes);

// Learning rate at a 1-based step, `wall_minutes` into the run (the run's
// clock, which max_minutes ends it by):
//   warm-up: linear from 0 to t.lr over t.warmup_steps, or over the first
//     t.warmup_share of the budget when that is set;
//   inverse_sqrt: then t.lr * sqrt(w / s) (w, s: the warm-up's end and now,
//     in steps, or in budget progress with warmup_share), never below t.min_lr;
//   linear, cosine: then from t.lr down to t.min_lr at the end of the budget
//     (Li et al. 2020, "Budget-aware training": a schedule that reaches its
//     end anneals; one that never does leaves the rate high). With
//     warmup_steps the decay runs over the whole budget and multiplies the
//     warm-up (the two overlap by the warm-up's few steps).
double learning_rate(const TrainConfig& t, int64_t step, double wall_minutes = 0);

class Scheduler {
 public:
  // lower_is_better: the direction of train.best_metric; `state` carries a
  // resumed run's early-stopping record (its best value and count).
  Scheduler(const TrainConfig& config, bool lower_is_better, const TrainingState& state);

  double learning_rate(int64_t step, double wall_minutes) const {
    return nmt::learning_rate(config_, step, wall_minutes);
  }
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
