#include "serve/metrics.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "util/number_text.h"

namespace nmt::serve {

namespace {

constexpr double kRateWindow = 10.0;  // seconds of batches nmt_tokens_per_second averages over

double now_seconds() {
  using namespace std::chrono;
  static const steady_clock::time_point start = steady_clock::now();
  return duration<double>(steady_clock::now() - start).count();
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP " + std::string(name) + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + shortest_number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + shortest_number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : latency_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      batch_sentences_({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      batch_seconds_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}) {}

void Metrics::request(const std::string& path, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{path, status}];
}

void Metrics::latency(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  latency_.observe(seconds);
}

void Metrics::batch(int64_t sentences, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  batch_sentences_.observe(static_cast<double>(sentences));
  batch_seconds_.observe(seconds);
}

void Metrics::translated(int64_t sentences, int64_t source_tokens, int64_t target_tokens, int64_t length_limited) {
  std::lock_guard<std::mutex> lock(mutex_);
  sentences_ += sentences;
  length_limited_ += length_limited;
  source_tokens_ += source_tokens;
  target_tokens_ += target_tokens;
  const double t = now_seconds();
  recent_.emplace_back(t, source_tokens + target_tokens);
  while (!recent_.empty() && recent_.front().first < t - kRateWindow) recent_.pop_front();
}

double Metrics::tokens_per_second_locked() const {
  const double t = now_seconds();
  int64_t tokens = 0;
  for (const auto& [end, n] : recent_)
    if (end >= t - kRateWindow) tokens += n;
  return static_cast<double>(tokens) / kRateWindow;
}

std::string Metrics::render(int64_t queue_sentences) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  header(out, "nmt_http_requests_total", "counter", "HTTP requests answered, by route and status code.");
  for (const auto& [key, n] : requests_)
    out += "nmt_http_requests_total{path=\"" + key.first + "\",code=\"" + std::to_string(key.second) +
           "\"} " + std::to_string(n) + "\n";
  header(out, "nmt_http_errors_total", "counter", "HTTP answers with a 4xx or 5xx status, by status code.");
  std::map<int, uint64_t> errors;
  for (const auto& [key, n] : requests_)
    if (key.second >= 400) errors[key.second] += n;
  for (const auto& [code, n] : errors)
    out += "nmt_http_errors_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  header(out, "nmt_translate_latency_seconds", "histogram",
         "Time from reading a /v1/translate request to its answer, for answers with status 200.");
  latency_.render("nmt_translate_latency_seconds", out);
  header(out, "nmt_batch_sentences", "histogram", "Sentences per translated batch (continuous batching: per decoding step).");
  batch_sentences_.render("nmt_batch_sentences", out);
  header(out, "nmt_batch_seconds", "histogram", "Time to translate one batch (continuous batching: one decoding step).");
  batch_seconds_.render("nmt_batch_seconds", out);
  header(out, "nmt_queue_sentences", "gauge", "Sentences waiting for a batch.");
  out += "nmt_queue_sentences " + std::to_string(queue_sentences) + "\n";
  header(out, "nmt_sentences_total", "counter", "Sentences translated.");
  out += "nmt_sentences_total " + std::to_string(sentences_) + "\n";
  header(out, "nmt_length_limited_total", "counter",
         "Sentences whose translation stopped at the length limit before ending (maybe cut short; "
         "--max-len-factor, --max-len).");
  out += "nmt_length_limited_total " + std::to_string(length_limited_) + "\n";
  header(out, "nmt_source_tokens_total", "counter", "Source tokens translated.");
  out += "nmt_source_tokens_total " + std::to_string(source_tokens_) + "\n";
  header(out, "nmt_target_tokens_total", "counter", "Target tokens produced.");
  out += "nmt_target_tokens_total " + std::to_string(target_tokens_) + "\n";
  header(out, "nmt_tokens_per_second", "gauge",
         "Source plus target tokens of the sentences finished in the last 10 seconds, per second.");
  out += "nmt_tokens_per_second " + shortest_number(tokens_per_second_locked()) + "\n";
  return out;
}

}  // namespace nmt::serve
