// Dynamic batching for the service: the one place that decides which queued
// requests are translated together. Concurrent requests wait in a bounded
// queue; a free worker takes the oldest request and every later one with the
// same decoding settings while the batch stays within a token budget, once
// that budget is reached or the oldest request has waited long enough.
// Several workers translate batches side by side (on the CPU one per core,
// each single-threaded: a decoding step is many small ops, so whole batches
// are the better unit of parallel work; CTranslate2's inter_threads).
// Jobs can instead be decoded with continuous batching: each worker keeps a
// StepStream running, which between two decoding steps takes queued jobs (of
// any beam width: greedy and beam sentences share a step) from its JobQueue
// while its source tokens stay within the budget; a sentence leaves the step
// it ends and its job is answered when its last line does, so no one waits
// for the batch's longest sentence.
// Nothing here knows about HTTP or the model: a BatchRunner or StepStream
// does the work.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/decode_options.h"

namespace nmt::serve {

using Clock = std::chrono::steady_clock;

struct BatchPolicy {
  int64_t max_batch_tokens = 2048;  // source tokens in one batch (a larger request goes alone)
  int64_t max_delay_ms = 5;         // the oldest request of a whole batch (static batching) waits at most this for company
  int64_t max_queue = 256;          // sentences waiting; beyond it submit() refuses
  int64_t workers = 1;              // batches translated at once
  bool continuous = true;           // jobs join running streams (when a StepStream factory is given)
  int64_t idle_release_ms = 2000;   // a worker idle this long releases its stream's memory (StepStream::release)
};

// What one request asks, and what it gets back.
struct Job {
  std::vector<std::string> lines;
  // Each line tokenized once, when the request is read (the service's
  // make_job); the workers decode these.
  std::vector<PreparedLine> sources;
  std::vector<int64_t> tokens;  // source tokens per line, as read (the batching budget counts these)
  std::vector<size_t> cut;      // lines longer than the model reads, cut to its max_positions (fit_source)
  int64_t beam = 0;             // 0 = greedy
  bool attention = false;
  Clock::time_point arrived;
  // Called on the worker's thread right after the job's future became ready
  // (answered or failed): an event-driven caller wakes up here instead of
  // parking a thread on the future.
  std::function<void()> on_done;
  int64_t total_tokens() const;
};

struct SentenceResult {
  std::string translation;
  std::string attention_json;  // filled when the job asked for attention
  bool length_limited = false;  // stopped at the length limit before ending (runtime/length_limit.h)
  std::vector<std::string> placeholders_lost;  // the line's placeholders its translation lacks
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

class StepStream;

// A worker's view of the Batcher's queue, for its stream: the jobs that may
// join the stream now, and where their results go. Used by one thread only.
class JobQueue {
 public:
  using Tickets = std::vector<std::pair<const Job*, uint64_t>>;
  virtual ~JobQueue() = default;
  // The jobs to join the stream now, each with the ticket its result is
  // answered by. `running`: the stream has sentences decoding; then jobs
  // from the queue's head join at once while their tokens fit beside the
  // stream's `source_tokens` (none may). An idle stream waits here for work
  // (and gives back its memory, stream.release(), after an idle spell).
  // nullopt: the Batcher is stopping with nothing left; the stream ends.
  virtual std::optional<Tickets> take(StepStream& stream, bool running, int64_t source_tokens) = 0;
  // Starts `jobs` with add(jobs), all in one encoder pass; when that throws,
  // one at a time, failing each that cannot start (the others run).
  virtual void start(const Tickets& jobs, const std::function<void(const Tickets&)>& add) = 0;
  // A job's results, line by line: it is answered.
  virtual void answer(uint64_t ticket, Sentences sentences) = 0;
};

// One worker's decoding with continuous batching: between two steps, jobs
// of any beam width join its running batch (StepStream::run takes them from
// its JobQueue); each job is answered when its last line ends.
class StepStream {
 public:
  virtual ~StepStream() = default;
  // Decodes what `queue` gives until it says the Batcher is stopping. A
  // throw (a failed step) fails the jobs still running; the Batcher then
  // starts a fresh stream.
  virtual void run(JobQueue& queue) = 0;
  // Called when the stream has been idle for BatchPolicy::idle_release_ms:
  // gives back the memory its largest batch grew to.
  virtual void release() {}
};
// Called once on each worker thread.
using StreamFactory = std::function<std::unique_ptr<StepStream>()>;

class Batcher {
 public:
  // With make_stream, jobs are decoded by continuous batching (unless
  // policy.continuous is false); else in whole batches by runner. The worker
  // threads are named "nmt-batch".
  Batcher(BatchPolicy policy, BatchRunner runner, StreamFactory make_stream = {});
  ~Batcher();  // stop() and join
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a job; an invalid future when the queue cannot take its lines
  // (full, or stopping): the caller answers 503.
  std::future<JobResult> submit(Job job);

  // Sentences waiting (not yet taken into a batch).
  int64_t queued() const;
  // Whether stop() has begun: new jobs are refused from then on.
  bool stopping() const;
  // Stops taking jobs, finishes every one already queued, then joins the workers.
  void stop();

 private:
  struct QueuedJob {
    Job job;
    std::promise<JobResult> done;
    // Sets the future's value or failure, then tells the job's on_done.
    void answer(JobResult r);
    void fail(const std::exception_ptr& failure);
  };
  void run();
  // Static batching: whole batches by runner_, until stopping.
  void run_batches();
  // Continuous batching: a worker's JobQueue (its running jobs, by ticket).
  class WorkerQueue;
  // Under mutex_: the next batch, removed from the queue.
  std::vector<std::unique_ptr<QueuedJob>> take_batch();
  // Under mutex_: jobs from the head of the queue while their tokens
  // fit in `budget` (the first one regardless when take_one is set).
  std::vector<std::unique_ptr<QueuedJob>> take_joining(int64_t budget, bool take_one);
  // Translates a batch with runner_ and answers its jobs.
  void run_batch(std::vector<std::unique_ptr<QueuedJob>> batch);
  bool streams() const { return policy_.continuous && make_stream_ != nullptr; }

  const BatchPolicy policy_;
  const BatchRunner runner_;
  const StreamFactory make_stream_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<QueuedJob>> queue_;
  int64_t queued_lines_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace nmt::serve
