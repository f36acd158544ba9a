// The training state a checkpoint keeps (state.yaml), and its text form.
// Plain C++17 (no LibTorch): the parser is fuzzed.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "data/position.h"

namespace nmt {

struct TrainingState {
  int64_t step = 0;       // optimizer steps taken
  DataPosition position;  // the next training batch
  // The metrics of the latest evaluation, by validator name ("loss", "bleu", ...).
  std::map<std::string, double> metrics;
  double best = std::numeric_limits<double>::quiet_NaN();  // best value of train.best_metric
  int64_t evals_since_best = 0;                             // for early stopping
  // Time spent so far, over every session of the run (a resumed run goes on
  // counting): training steps alone, and wall time with evaluations.
  double train_seconds = 0;
  double wall_seconds = 0;
  // The training corpus's target/source length ratio (runtime/length_limit.h),
  // from which decoding derives its length limit; NaN in checkpoints saved
  // before it was recorded.
  double target_source_ratio = std::numeric_limits<double>::quiet_NaN();
  // What the run's matrix multiplies compute in ("float32" or "bf16"), so
  // that a resumed run with train.precision auto keeps it instead of
  // measuring again (a new measurement could pick the other and change the
  // arithmetic mid-run); empty in checkpoints saved before it was recorded.
  std::string precision;
};

// state.yaml's text, and back (InputError naming `source` when malformed).
std::string training_state_yaml(const TrainingState& state);
TrainingState parse_training_state(const std::string& yaml, const std::string& source);

}  // namespace nmt
