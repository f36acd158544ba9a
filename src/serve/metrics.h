// The service's counters, rendered in Prometheus' text exposition format
// (version 0.0.4). Thread-safe; every update is a short critical section.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace nmt::serve {

// A cumulative histogram with fixed upper bounds (+Inf implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of `name`.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, then +Inf (not cumulative)
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // One HTTP answer; path is one of the service's routes or "other".
  void request(const std::string& path, int status);
  // Time from reading a /v1/translate request to its answer (200s only).
  void latency(double seconds);
  // One translated batch, or with continuous batching one decoding step.
  void batch(int64_t sentences, double seconds);
  // Sentences finished (counters and tokens/s); length_limited of them
  // stopped at the length limit before ending (runtime/length_limit.h).
  void translated(int64_t sentences, int64_t source_tokens, int64_t target_tokens, int64_t length_limited);
  // The text for GET /metrics; queue_sentences is read by the caller.
  std::string render(int64_t queue_sentences) const;

 private:
  double tokens_per_second_locked() const;

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (path, status) -> count
  Histogram latency_;         // seconds per /v1/translate answer
  Histogram batch_sentences_;
  Histogram batch_seconds_;
  uint64_t source_tokens_ = 0, target_tokens_ = 0, sentences_ = 0, length_limited_ = 0;
  // (end time in seconds since start, tokens) of recent sentences, for tokens/s
  // over the last kRateWindow seconds.
  std::deque<std::pair<double, int64_t>> recent_;
};

}  // namespace nmt::serve
