#include "serve/batcher.h"

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <map>

namespace nmt::serve {

int64_t Job::total_tokens() const {
  int64_t n = 0;
  for (int64_t t : tokens) n += t;
  return n;
}

Batcher::Batcher(BatchPolicy policy, BatchRunner runner, StreamFactory make_stream)
    : policy_(policy), runner_(std::move(runner)), make_stream_(std::move(make_stream)) {
  for (int64_t w = 0; w < std::max<int64_t>(1, policy_.workers); ++w)
    workers_.emplace_back([this] {
      // Named, so that tools (top -H, /proc, bench/bench_serve.sh) can tell
      // the decoding workers' CPU time from the HTTP threads' (MHD-worker).
      pthread_setname_np(pthread_self(), "nmt-batch");
      run();
    });
}

Batcher::~Batcher() { stop(); }

std::future<JobResult> Batcher::submit(Job job) {
  auto pending = std::make_unique<QueuedJob>();
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

bool Batcher::stopping() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stopping_;
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

std::vector<std::unique_ptr<Batcher::QueuedJob>> Batcher::take_batch() {
  // The oldest job leads; later jobs with the same settings join it, in
  // arrival order, while the token budget holds. Jobs with other settings
  // keep their places for a later batch.
  std::vector<std::unique_ptr<QueuedJob>> batch;
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

std::vector<std::unique_ptr<Batcher::QueuedJob>> Batcher::take_joining(int64_t budget, bool take_one) {
  // Strictly from the head, in arrival order: jobs of every beam width share
  // the stream.
  std::vector<std::unique_ptr<QueuedJob>> taken;
  while (!queue_.empty()) {
    const Job& job = queue_.front()->job;
    const int64_t tokens = job.total_tokens();
    if (tokens > budget && !(take_one && taken.empty())) break;
    budget -= tokens;
    queued_lines_ -= static_cast<int64_t>(job.lines.size());
    taken.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return taken;
}

void Batcher::QueuedJob::answer(JobResult r) {
  done.set_value(std::move(r));
  if (job.on_done) job.on_done();
}

void Batcher::QueuedJob::fail(const std::exception_ptr& failure) {
  try {
    done.set_exception(failure);
  } catch (const std::future_error&) {  // already answered before the failure
    return;
  }
  if (job.on_done) job.on_done();
}

void Batcher::run_batch(std::vector<std::unique_ptr<QueuedJob>> batch) {
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
      batch[i]->answer(std::move(r));
    }
  } catch (...) {
    const std::exception_ptr failure = std::current_exception();
    for (auto& p : batch) {
      p->fail(failure);
    }
  }
}

// A worker's side of the queue for its stream: the jobs it took and has not
// answered yet, so that a failed stream can fail them.
class Batcher::WorkerQueue final : public JobQueue {
 public:
  explicit WorkerQueue(Batcher& b) : b_(b) {}

  std::optional<Tickets> take(StepStream& stream, bool running, int64_t source_tokens) override {
    std::vector<std::unique_ptr<QueuedJob>> joining;
    {
      std::unique_lock<std::mutex> lock(b_.mutex_);
      if (running) {
        // Between two steps: newcomers join without waiting.
        joining = b_.take_joining(b_.policy_.max_batch_tokens - source_tokens, false);
      } else {
        const auto work = [&] { return b_.stopping_ || !b_.queue_.empty(); };
        for (;;) {
          // Idle: after a while with nothing to do, give back what the
          // largest batch grew to (a burst would otherwise keep it for
          // good), once for each spell of work.
          if (used_ && !b_.wake_.wait_for(lock, std::chrono::milliseconds(b_.policy_.idle_release_ms), work)) {
            lock.unlock();
            stream.release();
            used_ = false;
            lock.lock();
          }
          b_.wake_.wait(lock, work);
          if (b_.queue_.empty()) return std::nullopt;  // stopping, and nothing left to finish
          // A job bound for a stream starts at once: whoever comes later
          // joins it between two steps, so waiting would only add the
          // delay to a lone request.
          joining = b_.take_joining(b_.policy_.max_batch_tokens, true);
          if (!joining.empty()) break;  // else another worker took it meanwhile
        }
      }
    }
    const auto now = Clock::now();
    Tickets tickets;
    for (auto& p : joining) {
      tickets.emplace_back(&p->job, next_ticket_);
      running_[next_ticket_++] = {std::move(p), now};
    }
    used_ = used_ || !tickets.empty();
    return tickets;
  }

  void start(const Tickets& jobs, const std::function<void(const Tickets&)>& add) override {
    if (jobs.empty()) return;
    try {
      add(jobs);
    } catch (...) {
      // One at a time: only a job that cannot start fails.
      for (const auto& t : jobs) {
        try {
          add({t});
        } catch (...) {
          const auto it = running_.find(t.second);
          it->second.pending->fail(std::current_exception());
          running_.erase(it);
        }
      }
    }
  }

  void answer(uint64_t ticket, Sentences sentences) override {
    const auto it = running_.find(ticket);
    if (it == running_.end()) return;
    JobResult r;
    r.sentences = std::move(sentences);
    r.queue_seconds = std::chrono::duration<double>(it->second.joined - it->second.pending->job.arrived).count();
    r.batch_seconds = std::chrono::duration<double>(Clock::now() - it->second.joined).count();
    it->second.pending->answer(std::move(r));
    running_.erase(it);
  }

  // The stream failed: every job it was running fails with it.
  void fail_running(const std::exception_ptr& failure) {
    for (auto& [ticket, r] : running_) r.pending->fail(failure);
    running_.clear();
  }

 private:
  struct Running {
    std::unique_ptr<QueuedJob> pending;
    Clock::time_point joined;
  };
  Batcher& b_;
  std::map<uint64_t, Running> running_;  // by ticket: the jobs in the stream
  uint64_t next_ticket_ = 0;
  bool used_ = false;  // jobs joined the stream since its last release()
};

void Batcher::run() {
  if (!streams()) {
    run_batches();
    return;
  }
  WorkerQueue queue(*this);
  for (std::unique_ptr<StepStream> stream = make_stream_();; stream = make_stream_()) {
    try {
      stream->run(queue);
      return;
    } catch (...) {
      // A failed step fails every job in the stream; a fresh one takes over.
      queue.fail_running(std::current_exception());
    }
  }
}

void Batcher::run_batches() {
  for (;;) {
    std::vector<std::unique_ptr<QueuedJob>> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto work = [&] { return stopping_ || !queue_.empty(); };
      wake_.wait(lock, work);
      if (queue_.empty()) return;  // stopping, and nothing left to finish
      // Wait for company until the budget is full or the oldest job's delay
      // is up (at once when stopping: nothing more is coming).
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
    run_batch(std::move(batch));
  }
}

}  // namespace nmt::serve
