// The training batches, step by step: each global batch of an epoch's plan
// (plan_batches), cut into this rank's share. Every rank plans the same
// global batches, so N ranks see exactly the data one process would, and a
// run can resume with a different number of ranks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/position.h"

namespace nmt {

// One optimizer step's data for one rank.
struct StepBatch {
  Batch batch;                 // this rank's rows (none when the global batch has fewer rows than ranks)
  int64_t global_rows = 0;     // sentence pairs in the whole global batch
  int64_t global_tokens = 0;   // its target tokens (n + 1 per pair): the loss is divided by this
  int64_t global_src_tokens = 0;
  int64_t first_row = 0;       // index of this rank's first row within the global batch
  DataPosition position;       // where this batch was taken from
  DataPosition next;           // where the stream stands after it (what a checkpoint saves)
};

class BatchSource {
 public:
  // The corpus must outlive the source. batch_tokens/batch_sentences are the
  // global budget (see plan_batches); seed fixes every epoch's order.
  BatchSource(const TokenPairs& corpus, int64_t batch_tokens, int64_t batch_sentences,
              uint64_t seed, int64_t rank = 0, int64_t world_size = 1);

  // The batch at position(), then moves on (into the next epoch after the last).
  StepBatch next();
  const DataPosition& position() const { return position_; }
  // Continues from p (as saved with a checkpoint). InputError when p lies
  // outside its epoch's plan.
  void seek(const DataPosition& p);
  int64_t batches_in_epoch() const { return static_cast<int64_t>(plan_.size()); }

 private:
  void plan_epoch(int64_t epoch);

  const TokenPairs* corpus_;
  int64_t batch_tokens_, batch_sentences_;
  uint64_t seed_;
  int64_t rank_, world_size_;
  DataPosition position_;
  int64_t planned_epoch_ = -1;
  BatchPlan plan_;
};

// A BatchSource's next() on a thread of its own, `depth` batches ahead: the
// step never waits for a batch to be assembled (ids read from the shards,
// tensors filled), and gets exactly the batches the source would give, in
// the same order. The source is seeked before, and not touched after.
class PrefetchingSource {
 public:
  explicit PrefetchingSource(BatchSource& source, size_t depth = 2);
  ~PrefetchingSource();  // stops the thread
  PrefetchingSource(const PrefetchingSource&) = delete;
  PrefetchingSource& operator=(const PrefetchingSource&) = delete;

  // The next batch; an error the thread met (a damaged shard) is thrown here.
  StepBatch next();
  // How long next() has waited for batches, in all: ~0 while data is never the bottleneck.
  double waited_seconds() const { return waited_; }

 private:
  void run();

  BatchSource& source_;
  size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<StepBatch> ready_;
  std::exception_ptr failure_;
  bool stop_ = false;
  double waited_ = 0;
  std::thread thread_;
};

// Rows [begin, end) of a global batch of `rows` rows that rank r of n takes:
// contiguous, sizes differing by at most one.
std::pair<int64_t, int64_t> rank_rows(int64_t rows, int64_t rank, int64_t world_size);

}  // namespace nmt
