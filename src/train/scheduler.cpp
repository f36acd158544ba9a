#include "train/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nmt {

double budget_progress(const TrainConfig& t, int64_t step, double wall_minutes) {
  double p = 0;
  if (t.max_steps > 0) p = std::max(p, static_cast<double>(step) / static_cast<double>(t.max_steps));
  if (t.max_minutes > 0) p = std::max(p, wall_minutes / t.max_minutes);
  return std::clamp(p, 0.0, 1.0);
}

double learning_rate(const TrainConfig& t, int64_t step, double wall_minutes) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double progress = budget_progress(t, step, wall_minutes);
  const bool by_share = t.warmup_share > 0;
  // Where the run stands and where the warm-up ends, in the warm-up's units.
  const double now = by_share ? progress : s;
  const double end = by_share ? t.warmup_share : static_cast<double>(t.warmup_steps);
  if (t.lr_schedule == "inverse_sqrt") {
    if (now < end) return t.lr * now / end;
    return std::max(t.min_lr, t.lr * std::sqrt(end / std::max(now, 1e-12)));
  }
  const double warm = std::min(1.0, now / end);
  // Decay progress: after the warm-up's share, or over the whole budget.
  const double q = by_share ? std::clamp((progress - t.warmup_share) / (1.0 - t.warmup_share), 0.0, 1.0)
                            : progress;
  constexpr double kPi = 3.14159265358979323846;
  const double shape = t.lr_schedule == "cosine" ? 0.5 * (1.0 + std::cos(kPi * q)) : 1.0 - q;
  return warm * (t.min_lr + (t.lr - t.min_lr) * shape);
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
