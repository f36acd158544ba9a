// Training, wired from its parts: CheckpointManager (tokenizers, resume,
// last/ and best/), BatchSource (this rank's share of each global batch),
// Scheduler (every "when": learning rate, logging, validation, stopping),
// TrainStep (one update, where gradients meet), validators, and a Reporter
// (logs, metrics.jsonl, progress).
#pragma once

#include <ostream>
#include <string>

#include "config/config.h"
#include "train/checkpoint_manager.h"
#include "train/reporter.h"

namespace nmt {

// Trains per cfg on cfg.attention.device. Writes cfg.train.checkpoint_dir/{last,best},
// holding that folder's lock (checkpoint/run_lock.h) while it runs.
// start.resume: a checkpoint (or run folder: its last/) to continue exactly
// from: weights, optimizer, step, position in the data.
TrainResult train(const Config& cfg, const RunStart& start = {});

// Runs 5 warm-up steps, then `steps` steps under LibTorch's profiler, and
// writes a table of the ops taking the time. Writes no checkpoint (start:
// its inputs_checked is called as a run's is; the rest is ignored).
void profile_training(const Config& cfg, int64_t steps, std::ostream& out, RunStart start = {});

}  // namespace nmt
