// Teacher-forced training loop: batches, Adam with warmup + inverse-sqrt
// decay, clipping, logging, validation and checkpoints.
#pragma once

#include <string>

#include "config/config.h"

namespace nmt {

struct TrainResult {
  int64_t steps = 0;
  double last_train_loss = 0;   // mean over the last log window
  double best_valid_loss = 0;
  double tokens_per_second = 0; // source + target tokens, whole run
  std::string checkpoint_dir;
};

// Learning rate at a 1-based step.
double learning_rate(const TrainConfig& t, int64_t step);

// Trains per cfg on cfg.attention.device. Writes cfg.train.checkpoint_dir/{last,best}.
TrainResult train(const Config& cfg);

}  // namespace nmt
