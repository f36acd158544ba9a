// Teacher-forced training loop: batches, Adam with warmup + inverse-sqrt
// decay, clipping, logging, validation and checkpoints.
#pragma once

#include <string>

#include "config/config.h"

namespace nmt {

struct TrainResult {
  int64_t steps = 0;
  double last_train_loss = 0;   // mean over the last log window
  double final_step_loss = 0;   // loss of the last optimizer step
  double best_score = 0;        // best validation BLEU or -loss (train.best_metric)
  double best_valid_loss = 0;
  double tokens_per_second = 0; // source + target tokens, whole run
  std::string checkpoint_dir;
};

// Learning rate at a 1-based step.
double learning_rate(const TrainConfig& t, int64_t step);

// Trains per cfg on cfg.attention.device. Writes cfg.train.checkpoint_dir/{last,best}.
// resume_dir: a checkpoint (or run folder: its last/) to continue exactly from:
// weights, optimizer, step, epoch, position in the epoch's batch order, RNG.
TrainResult train(const Config& cfg, const std::string& resume_dir = "");

// The config a resumed run continues with: the checkpoint's own.
Config resume_config(const std::string& resume_dir);

}  // namespace nmt
