#include "serve/batcher.h"

#include <algorithm>
#include <exception>

namespace nmt::serve {

int64_t Job::total_tokens() const {
  int64_t n = 0;
  for (int64_t t : tokens) n += t;
  return n;
}

Batcher::Batcher(BatchPolicy policy, BatchRunner runner)
    : policy_(policy), runner_(std::move(runner)) {
  for (int64_t w = 0; w < std::max<int64_t>(1, policy_.workers); ++w) workers_.emplace_back([this] { run(); });
}

Batcher::~Batcher() { stop(); }

std::future<JobResult> Batcher::submit(Job job) {
  auto pending = std::make_unique<Pending>();
  const int64_t lines = static_cast<int64_t>(job.lines.size());
  job.arrived = Clock::now();
  pending->job = std::move(job);
  std::future<JobResult> result = pending->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A request larger than the whole queue is still taken when the queue is
    // empty (the request limit, not the queue, bounds its size).
    if (stopping_ || (queued_lines_ > 0 && queued_lines_ + lines > policy_.max_queue)) return {};
    queued_lines_ += lines;
    queue_.push_back(std::move(pending));
  }
  wake_.notify_one();
  return result;
}

int64_t Batcher::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_lines_;
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& w : workers_)
    if (w.joinable()) w.join();
}

std::vector<std::unique_ptr<Batcher::Pending>> Batcher::take_batch() {
  // The oldest job leads; later jobs with the same settings join it, in
  // arrival order, while the token budget holds. Jobs with other settings
  // keep their places for a later batch.
  std::vector<std::unique_ptr<Pending>> batch;
  const Job& lead = queue_.front()->job;
  int64_t tokens = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const Job& job = (*it)->job;
    const bool same = job.beam == lead.beam;
    if (same && !batch.empty() && tokens + job.total_tokens() > policy_.max_batch_tokens) break;
    if (!same) {
      ++it;
      continue;
    }
    tokens += job.total_tokens();
    queued_lines_ -= static_cast<int64_t>(job.lines.size());
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  return batch;
}

void Batcher::run() {
  for (;;) {
    std::vector<std::unique_ptr<Pending>> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to finish
      // Wait for company until the budget is full or the oldest job's delay is up
      // (at once when stopping: nothing more is coming).
      const auto deadline = queue_.front()->job.arrived + std::chrono::milliseconds(policy_.max_delay_ms);
      wake_.wait_until(lock, deadline, [&] {
        if (stopping_ || queue_.empty()) return true;
        int64_t tokens = 0;
        for (const auto& p : queue_) tokens += p->job.total_tokens();
        return tokens >= policy_.max_batch_tokens;
      });
      if (queue_.empty()) continue;  // another worker took it meanwhile
      batch = take_batch();
    }
    std::vector<const Job*> jobs;
    for (const auto& p : batch) jobs.push_back(&p->job);
    const auto start = Clock::now();
    try {
      std::vector<Sentences> results = runner_(jobs);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      for (size_t i = 0; i < batch.size(); ++i) {
        JobResult r;
        r.sentences = std::move(results.at(i));
        r.queue_seconds = std::chrono::duration<double>(start - batch[i]->job.arrived).count();
        r.batch_seconds = seconds;
        batch[i]->done.set_value(std::move(r));
      }
    } catch (...) {
      const std::exception_ptr failure = std::current_exception();
      for (auto& p : batch) {
        try {
          p->done.set_exception(failure);
        } catch (const std::future_error&) {  // already answered before the failure
        }
      }
    }
  }
}

}  // namespace nmt::serve
