#include "train/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nmt {

double learning_rate(const TrainConfig& t, int64_t step) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double w = static_cast<double>(t.warmup_steps);
  return t.lr * std::min(s / w, std::sqrt(w / s));
}

Scheduler::Scheduler(const TrainConfig& config, bool lower_is_better, const TrainingState& state)
    : config_(config), stopping_(lower_is_better, config.patience) {
  stopping_.restore(state.best, state.evals_since_best);
}

bool Scheduler::counts_reached(const TrainingState& state) const {
  return (config_.max_steps > 0 && state.step >= config_.max_steps) ||
         (config_.max_epochs > 0 && state.position.epoch >= config_.max_epochs);
}

bool Scheduler::out_of_time(double wall_minutes) const {
  return config_.max_minutes > 0 && wall_minutes >= config_.max_minutes;
}

Scheduler::Verdict Scheduler::validated(const std::map<std::string, double>& metrics) {
  Verdict v;
  v.best = stopping_.update(metrics.at(config_.best_metric));
  if (stopping_.stalled()) {
    v.stop = true;
    v.why = fmt::format("train: no improvement in {} evaluations, stopping", config_.patience);
    return v;
  }
  const double target = config_.stop_at_bleu;
  const auto bleu = metrics.find("bleu");
  if (target > 0 && bleu != metrics.end() && bleu->second >= target) {
    v.stop = true;
    v.why = fmt::format("train: validation BLEU {:.2f} reached train.stop_at_bleu {:.2f}, stopping", bleu->second,
                        target);
  }
  return v;
}

}  // namespace nmt
