// What a run tells its user: spdlog lines, metrics.jsonl (one JSON object per
// log line or evaluation) and a live progress line on a terminal. Only one
// rank reports; the others hold an inactive Reporter.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "train/gradient_sync.h"
#include "train/train_step.h"
#include "util/atomic_file.h"

namespace nmt {

struct TrainResult {
  int64_t steps = 0;
  double last_train_loss = 0;    // mean over the last log window
  double best = 0;               // best value of train.best_metric
  double tokens_per_second = 0;  // source + target tokens per second of this session's training
  double train_seconds = 0;      // this session's training steps, evaluations excluded
  double run_train_seconds = 0;  // the same over every session of the run (a resumed run's included)
  std::string checkpoint_dir;
  SyncStats sync;                // gradient synchronisation (several ranks)
  int interrupted = 0;           // the signal that stopped the run early (0: it ran its course)
};

// A metrics file's lines, less those of steps after `step` (counted in
// *dropped) and an unended last line (a write a crash cut short; *torn set):
// a run resumed from the checkpoint of step N logs N+1.. again, and the
// lines an earlier session wrote past its last save (before a crash or a
// kill) would stand twice in the file, with other losses.
std::string lines_up_to_step(const std::string& text, int64_t step, int64_t* dropped, bool* torn = nullptr);

// What a run's end reports besides its steps and losses (Reporter::finish).
struct RunEnd {
  double data_wait_seconds = 0;  // the steps' waits for their batches (PrefetchingSource)
  SyncStats sync;                // gradient synchronisation
  bool distributed = false;      // several ranks
};

class Reporter {
 public:
  // append: continue the metrics file of a resumed run, from the step
  // resumed from; `state` carries the time its earlier sessions took, so the
  // clocks go on from there.
  Reporter(const TrainConfig& config, const TrainingState& state, bool append, bool active);
  ~Reporter();

  // After every step. Reads the loss tensors only when `window_ends` (the
  // Scheduler's logs_after), and then logs the window.
  void step(const TrainingState& state, const StepOutput& out, int64_t tokens, double lr, bool window_ends);
  // Evaluations pause the training clock.
  void pause_clock();
  void resume_clock();
  void evaluation(const TrainingState& state, const std::map<std::string, double>& metrics,
                  bool best);
  void info(const std::string& line);
  void warn(const std::string& line);
  // The whole run's wall time, evaluations included.
  double wall_minutes() const;
  // Before a checkpoint is saved: writes the run's clocks into the state it
  // keeps, and makes the metrics lines logged so far durable (a run resumed
  // from it finds them all).
  void stamp(TrainingState& state);
  // The run's last lines: steps, time, tokens/s, the best metric, and the
  // waits for data, the tensor cache's reuse and (several ranks) the
  // all-reduces.
  TrainResult finish(const TrainingState& state, const RunEnd& end = {});

 private:
  using Clock = std::chrono::steady_clock;
  void write_json(const std::vector<std::pair<std::string, double>>& fields);
  void show_progress(const TrainingState& state, double tok_s);
  // What is left of the run's budget (train.max_steps, max_minutes,
  // max_epochs) in words: "~4:10 (3,880 steps)", "12:05 of max_minutes".
  std::string budget_left(const TrainingState& state) const;
  void clear_progress();
  double session_train_seconds() const;
  double train_seconds() const { return prior_train_seconds_ + session_train_seconds(); }
  double wall_seconds() const;

  TrainConfig config_;
  bool active_;
  bool tty_;
  // metrics.jsonl: trimmed and rewritten once when the run starts
  // (lines_up_to_step), then appended to a line at a time (util/atomic_file.h).
  std::unique_ptr<AppendFile> metrics_;
  std::string metrics_path_;
  Clock::time_point start_, window_start_, paused_at_, last_progress_;
  double prior_train_seconds_ = 0, prior_wall_seconds_ = 0;  // earlier sessions
  int64_t start_step_ = 0;  // the step this session started at (a resumed run's)
  bool loss_known_ = false;  // a window has been logged: last_loss_ holds its loss
  double paused_seconds_ = 0;  // evaluation time so far
  bool paused_ = false;
  bool progress_shown_ = false;
  std::vector<at::Tensor> window_losses_;  // per step: [loss, loss without smoothing]
  int64_t window_tokens_ = 0, total_tokens_ = 0, window_steps_ = 0;
  double window_paused_ = 0;
  double last_loss_ = 0;
};

}  // namespace nmt
