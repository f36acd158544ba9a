#include "train/reporter.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "train/recent_block_cache.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

std::string lines_up_to_step(const std::string& text, int64_t step, int64_t* dropped, bool* torn) {
  static constexpr std::string_view kKey = "{\"step\": ";
  std::string kept;
  kept.reserve(text.size());
  int64_t n = 0;
  if (torn) *torn = false;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) {  // every line nmt writes ends: this one was cut short
      if (torn) *torn = true;
      break;
    }
    ++end;
    const std::string_view line(text.data() + at, end - at);
    // Every line nmt writes starts with its step; another line is kept as is.
    if (line.substr(0, kKey.size()) == kKey && std::strtod(line.data() + kKey.size(), nullptr) > double(step)) ++n;
    else kept.append(line);
    at = end;
  }
  if (dropped) *dropped = n;
  return kept;
}

Reporter::Reporter(const TrainConfig& config, const TrainingState& state, bool append, bool active)
    : config_(config),
      active_(active),
      tty_(active && config.progress && isatty(STDERR_FILENO)),
      prior_train_seconds_(state.train_seconds),
      prior_wall_seconds_(state.wall_seconds),
      start_step_(state.step) {
  start_ = window_start_ = Clock::now();
  if (!active_) return;
  metrics_path_ = config.metrics_file.empty()
                      ? (fs::path(config.checkpoint_dir) / "metrics.jsonl").string()
                      : config.metrics_file;
  const fs::path parent = fs::path(metrics_path_).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  int64_t dropped = 0;
  bool torn = false;
  std::string kept;
  if (append && fs::exists(metrics_path_))
    kept = lines_up_to_step(read_file(metrics_path_, "metrics log"), state.step, &dropped, &torn);
  write_file_atomic(metrics_path_, kept);  // fails here, not an hour in
  metrics_ = std::make_unique<AppendFile>(metrics_path_);
  if (dropped > 0)
    info(fmt::format("metrics: {} line{} logged after step {} (the step resumed from) dropped from {}: the steps "
                     "after it run again", dropped, dropped == 1 ? "" : "s", state.step, metrics_path_));
  if (torn) info(fmt::format("metrics: an unended last line (a write cut short) dropped from {}", metrics_path_));
}

Reporter::~Reporter() { clear_progress(); }

double Reporter::session_train_seconds() const {
  const double total = std::chrono::duration<double>(Clock::now() - start_).count();
  const double paused =
      paused_seconds_ + (paused_ ? std::chrono::duration<double>(Clock::now() - paused_at_).count() : 0);
  return total - paused;
}

double Reporter::wall_seconds() const {
  return prior_wall_seconds_ + std::chrono::duration<double>(Clock::now() - start_).count();
}

double Reporter::wall_minutes() const { return wall_seconds() / 60.0; }

void Reporter::stamp(TrainingState& state) {
  state.train_seconds = train_seconds();
  state.wall_seconds = wall_seconds();
  if (metrics_) metrics_->sync();
}

void Reporter::pause_clock() {
  if (!paused_) paused_ = true, paused_at_ = Clock::now();
}

void Reporter::resume_clock() {
  if (!paused_) return;
  const double s = std::chrono::duration<double>(Clock::now() - paused_at_).count();
  paused_seconds_ += s;
  window_paused_ += s;
  paused_ = false;
}

void Reporter::write_json(const std::vector<std::pair<std::string, double>>& fields) {
  std::string line = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    char buf[64];
    const double v = fields[i].second;
    if (std::isfinite(v)) std::snprintf(buf, sizeof buf, "%.10g", v);
    else std::snprintf(buf, sizeof buf, "null");
    line += (i ? ", \"" : "\"") + fields[i].first + "\": " + buf;
  }
  if (metrics_) metrics_->append(line + "}\n");
}

namespace {

// "1:05" (minutes:seconds) or "2:03:04".
std::string clock_text(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

std::string Reporter::budget_left(const TrainingState& state) const {
  std::string by_steps, by_time;
  double steps_seconds = -1, time_seconds = -1;
  if (config_.max_steps > 0) {
    const int64_t left = std::max<int64_t>(0, config_.max_steps - state.step);
    const int64_t done = state.step - start_step_;
    // This session's pace, evaluations included (they come out of the budget too).
    if (done > 0) steps_seconds = left * (wall_seconds() - prior_wall_seconds_) / static_cast<double>(done);
    by_steps = (steps_seconds >= 0 ? "~" + clock_text(steps_seconds) + " (" : "(") + std::to_string(left) + " steps)";
  }
  if (config_.max_minutes > 0) {
    time_seconds = config_.max_minutes * 60 - wall_seconds();
    by_time = clock_text(time_seconds) + " of train.max_minutes";
  }
  std::string left;
  if (!by_steps.empty() && !by_time.empty()) left = steps_seconds >= 0 && steps_seconds < time_seconds ? by_steps : by_time;
  else left = by_steps.empty() ? by_time : by_steps;
  if (config_.max_epochs > 0)
    left += fmt::format("{}epoch {}/{}", left.empty() ? "" : ", ", state.position.epoch + 1, config_.max_epochs);
  return left;
}

void Reporter::show_progress(const TrainingState& state, double tok_s) {
  if (!tty_) return;
  const auto now = Clock::now();
  if (now - last_progress_ < std::chrono::milliseconds(200)) return;
  last_progress_ = now;
  std::string line = config_.max_steps > 0 ? fmt::format("step {}/{}", state.step, config_.max_steps)
                                           : fmt::format("step {}", state.step);
  // The loss of the last logged window: reading it every step would wait
  // for the step's work to finish.
  if (loss_known_) line += fmt::format("  loss {:.3f}", last_loss_);
  line += fmt::format("  {:.0f} tok/s  elapsed {}", tok_s, clock_text(wall_seconds()));
  const std::string left = budget_left(state);
  if (!left.empty()) line += "  left " + left;
  std::fprintf(stderr, "\r\033[K  %s", line.c_str());
  std::fflush(stderr);
  progress_shown_ = true;
}

void Reporter::clear_progress() {
  if (progress_shown_) std::fprintf(stderr, "\r\033[K");
  progress_shown_ = false;
}

void Reporter::step(const TrainingState& state, const StepOutput& out, int64_t tokens, double lr,
                    bool window_ends) {
  window_losses_.push_back(out.nll.defined() ? at::stack({out.loss, out.nll}) : at::stack({out.loss, out.loss}));
  window_tokens_ += tokens, total_tokens_ += tokens, ++window_steps_;
  if (!active_) {
    if (window_ends) window_losses_.clear();
    return;
  }
  const double window_s = std::max(
      1e-9, std::chrono::duration<double>(Clock::now() - window_start_).count() - window_paused_);
  show_progress(state, window_tokens_ / window_s);
  if (!window_ends) return;
  // The one read of the losses in a window: [loss, nll].
  const at::Tensor sums = at::stack(window_losses_).sum(0).to(at::kCPU, at::kDouble);
  last_loss_ = sums[0].item<double>() / static_cast<double>(window_steps_);
  loss_known_ = true;
  const double nll = sums[1].item<double>() / static_cast<double>(window_steps_);
  clear_progress();
  spdlog::info("step {} epoch {} loss {:.4f} (unsmoothed {:.4f}) lr {:.3e} {:.0f} tok/s", state.step,
               state.position.epoch + 1, last_loss_, nll, lr, window_tokens_ / window_s);
  // train_loss is the objective (label-smoothed); train_nll the same
  // cross-entropy as valid_loss, so the two compare.
  write_json({{"step", double(state.step)}, {"epoch", double(state.position.epoch + 1)},
              {"train_loss", last_loss_}, {"train_nll", nll}, {"lr", lr}, {"tokens_per_s", window_tokens_ / window_s},
              {"window_tokens", double(window_tokens_)}, {"window_seconds", window_s},
              {"train_seconds", train_seconds()}, {"wall_seconds", wall_seconds()}});
  window_losses_.clear();
  window_tokens_ = window_steps_ = 0;
  window_paused_ = 0;
  window_start_ = Clock::now();
}

void Reporter::evaluation(const TrainingState& state, const std::map<std::string, double>& metrics,
                          bool best) {
  if (!active_) return;
  clear_progress();
  std::string line = "valid: step " + std::to_string(state.step);
  std::vector<std::pair<std::string, double>> fields{{"step", double(state.step)},
                                                     {"epoch", double(state.position.epoch + 1)}};
  for (const auto& [name, value] : metrics) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s %.4g", name.c_str(), value);
    line += buf;
    fields.emplace_back("valid_" + name, value);
  }
  fields.emplace_back("train_seconds", train_seconds());
  fields.emplace_back("wall_seconds", wall_seconds());
  spdlog::info("{}{}", line, best ? " (best)" : "");
  write_json(fields);
}

void Reporter::info(const std::string& line) {
  if (!active_) return;
  clear_progress();
  spdlog::info("{}", line);
}

void Reporter::warn(const std::string& line) {
  if (!active_) return;
  clear_progress();
  spdlog::warn("{}", line);
}

TrainResult Reporter::finish(const TrainingState& state, const RunEnd& end) {
  clear_progress();
  TrainResult r;
  r.steps = state.step;
  r.last_train_loss = last_loss_;
  r.best = state.best;
  r.train_seconds = session_train_seconds();
  r.run_train_seconds = train_seconds();
  r.tokens_per_second = total_tokens_ / std::max(r.train_seconds, 1e-9);
  r.checkpoint_dir = config_.checkpoint_dir;
  if (active_) {
    // Stopped before the first validation: there is no best value yet.
    const std::string best = std::isfinite(r.best) ? fmt::format("best {} {:.4g}", config_.best_metric, r.best)
                                                   : fmt::format("no {} measured yet", config_.best_metric);
    // The run's steps with the run's time; a resumed run's session apart,
    // its steps with its own time (tokens/s are this session's).
    const std::string session =
        start_step_ == 0        ? fmt::format("{:.0f} tok/s", r.tokens_per_second)
        : r.steps == start_step_ ? std::string("this session: no steps")
                                 : fmt::format("this session: steps {} to {} ({}) in {:.1f} s, {:.0f} tok/s",
                                               start_step_ + 1, r.steps, r.steps - start_step_, r.train_seconds,
                                               r.tokens_per_second);
    spdlog::info("train: {} steps in {:.1f} s of training{}, {}; {}; checkpoints in {}", r.steps, r.run_train_seconds,
                 start_step_ == 0 ? "" : " in all", session, best, r.checkpoint_dir);
  }
  info(fmt::format("data: the steps waited {:.2f} s in all for their batches ({:.2f}% of training time)",
                   end.data_wait_seconds, 100.0 * end.data_wait_seconds / std::max(r.train_seconds, 1e-9)));
  if (const RecentBlockCacheStats m = recent_block_cache_stats(); m.reused + m.fresh > 0)
    info(fmt::format("memory: {:.1f}% of the tensors from 256 KB up took a block freed before (train/"
                     "recent_block_cache.h); {:.0f} MB in use at most, {:.0f} MB kept for reuse at the end",
                     100.0 * m.reused / (m.reused + m.fresh), m.peak_bytes / 1e6, m.cached_bytes / 1e6));
  r.sync = end.sync;
  if (end.distributed && r.sync.steps > 0)
    info(fmt::format("distributed: {:.1f} MB of gradients all-reduced per step, {:.1f} ms per step waiting for them "
                     "after the backward pass",
                     r.sync.bytes / r.sync.steps / 1e6, 1e3 * r.sync.wait_seconds / r.sync.steps));
  return r;
}

}  // namespace nmt
