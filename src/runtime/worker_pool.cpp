#include "runtime/worker_pool.h"

#include <pthread.h>

#include <algorithm>
#include <exception>

namespace nmt::runtime {

// One run()'s jobs: how many are left, and the first failure.
struct WorkerPool::Batch {
  size_t left = 0;
  std::exception_ptr failure;
  std::condition_variable done;
};

WorkerPool::WorkerPool(int workers) {
  for (int i = 0; i < std::max(1, workers); ++i) {
    threads_.emplace_back([this] { work(); });
    // (named for top and for the service's per-thread accounting)
    pthread_setname_np(threads_.back().native_handle(), "nmt-decode");
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::run(const std::vector<std::function<void()>>& jobs) {
  if (jobs.empty()) return;
  Batch batch;
  std::unique_lock<std::mutex> lock(mutex_);
  batch.left = jobs.size();
  for (const auto& job : jobs) queue_.emplace_back(&job, &batch);
  wake_.notify_all();
  batch.done.wait(lock, [&] { return batch.left == 0; });
  if (batch.failure) std::rethrow_exception(batch.failure);
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const auto [job, batch] = queue_.front();
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr failure;
    try {
      (*job)();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    if (failure && !batch->failure) batch->failure = failure;
    if (--batch->left == 0) batch->done.notify_all();
  }
}

}  // namespace nmt::runtime
