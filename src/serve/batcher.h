// Dynamic batching for the service: the one place that decides which queued
// requests are translated together. Concurrent requests wait in a bounded
// queue; a free worker takes the oldest request and every later one with the
// same decoding settings while the batch stays within a token budget, once
// that budget is reached or the oldest request has waited long enough.
// Several workers translate batches side by side (on the CPU one per core,
// each single-threaded: a decoding step is many small ops, so whole batches
// are the better unit of parallel work; CTranslate2's inter_threads).
// Nothing here knows about HTTP or the model: a BatchRunner does the work.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nmt::serve {

using Clock = std::chrono::steady_clock;

struct BatchPolicy {
  int64_t max_batch_tokens = 2048;  // source tokens in one batch (a larger request goes alone)
  int64_t max_delay_ms = 5;         // the oldest request waits at most this for company
  int64_t max_queue = 256;          // sentences waiting; beyond it submit() refuses
  int64_t workers = 1;              // batches translated at once
};

// What one request asks, and what it gets back.
struct Job {
  std::vector<std::string> lines;
  std::vector<int64_t> tokens;  // source tokens per line (the batching budget counts these)
  int64_t beam = 0;             // 0 = greedy
  bool attention = false;
  Clock::time_point arrived;
  int64_t total_tokens() const;
};

struct SentenceResult {
  std::string translation;
  std::string attention_json;  // filled when the job asked for attention
};
using Sentences = std::vector<SentenceResult>;

struct JobResult {
  Sentences sentences;          // one per line of the job
  double queue_seconds = 0;     // from submit() until its batch started
  double batch_seconds = 0;     // the batch's translation (shared with its other jobs)
};

// Translates a batch: results[i][j] for line j of jobs[i]. Throws to fail
// every job of the batch. Called from every worker thread at once.
using BatchRunner = std::function<std::vector<Sentences>(const std::vector<const Job*>& jobs)>;

class Batcher {
 public:
  Batcher(BatchPolicy policy, BatchRunner runner);
  ~Batcher();  // stop() and join
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a job; an invalid future when the queue cannot take its lines
  // (full, or stopping): the caller answers 503.
  std::future<JobResult> submit(Job job);

  // Sentences waiting (not yet taken into a batch).
  int64_t queued() const;
  // Stops taking jobs, finishes every one already queued, then joins the workers.
  void stop();

 private:
  struct Pending {
    Job job;
    std::promise<JobResult> done;
  };
  void run();
  // Under mutex_: the next batch, removed from the queue.
  std::vector<std::unique_ptr<Pending>> take_batch();

  const BatchPolicy policy_;
  const BatchRunner runner_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Pending>> queue_;
  int64_t queued_lines_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace nmt::serve
