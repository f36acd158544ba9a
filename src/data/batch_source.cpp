#include "data/batch_source.h"

#include <chrono>
#include <random>
#include <string>

#include "util/errors.h"

namespace nmt {

std::pair<int64_t, int64_t> rank_rows(int64_t rows, int64_t rank, int64_t world_size) {
  return {rows * rank / world_size, rows * (rank + 1) / world_size};
}

BatchSource::BatchSource(const TokenPairs& corpus, int64_t batch_tokens,
                         int64_t batch_sentences, uint64_t seed, int64_t rank, int64_t world_size)
    : corpus_(&corpus),
      batch_tokens_(batch_tokens),
      batch_sentences_(batch_sentences),
      seed_(seed),
      rank_(rank),
      world_size_(world_size) {
  plan_epoch(0);
}

void BatchSource::plan_epoch(int64_t epoch) {
  if (epoch == planned_epoch_) return;
  // The order depends only on (seed, epoch): a resumed run sees the same batches.
  std::mt19937_64 rng(seed_ * 1000003ull + static_cast<uint64_t>(epoch));
  plan_ = plan_batches(*corpus_, batch_tokens_, batch_sentences_, rng);
  planned_epoch_ = epoch;
}

void BatchSource::seek(const DataPosition& p) {
  plan_epoch(p.epoch);
  if (p.epoch < 0 || p.batch < 0 || p.batch > batches_in_epoch())
    throw InputError("data position epoch " + std::to_string(p.epoch + 1) + ", batch " +
                     std::to_string(p.batch) + " is outside that epoch's " +
                     std::to_string(batches_in_epoch()) + " batches (different data or batch size?)");
  position_ = p;
  if (position_.batch == batches_in_epoch()) {  // saved just after an epoch's last batch
    position_ = {p.epoch + 1, 0};
    plan_epoch(position_.epoch);
  }
}

StepBatch BatchSource::next() {
  const std::vector<int64_t> global = plan_[static_cast<size_t>(position_.batch)];
  StepBatch out;
  out.position = position_;
  out.global_rows = static_cast<int64_t>(global.size());
  for (int64_t i : global) {
    out.global_tokens += corpus_->tgt_length(i) + 1;
    out.global_src_tokens += corpus_->src_length(i);
  }
  const auto [begin, end] = rank_rows(out.global_rows, rank_, world_size_);
  out.first_row = begin;
  out.batch = make_batch(*corpus_, std::vector<int64_t>(global.begin() + begin, global.begin() + end));
  ++position_.batch;
  if (position_.batch >= batches_in_epoch()) {
    // Wrap now, so that position() (saved with checkpoints) and the epoch
    // count are right as soon as an epoch's last batch has been served.
    position_ = {position_.epoch + 1, 0};
    plan_epoch(position_.epoch);
  }
  out.next = position_;
  return out;
}

PrefetchingSource::PrefetchingSource(BatchSource& source, size_t depth)
    : source_(source), depth_(std::max<size_t>(1, depth)), thread_([this] { run(); }) {}

PrefetchingSource::~PrefetchingSource() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void PrefetchingSource::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || ready_.size() < depth_; });
      if (stop_ || failure_) return;
    }
    try {
      StepBatch b = source_.next();
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.push_back(std::move(b));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

StepBatch PrefetchingSource::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto t0 = std::chrono::steady_clock::now();
  changed_.wait(lock, [&] { return !ready_.empty() || failure_; });
  waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ready_.empty()) std::rethrow_exception(failure_);
  StepBatch b = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  changed_.notify_all();
  return b;
}

}  // namespace nmt
