// The threads a Translator decodes on, set up inside the library: the
// caller's own threads (a Python interpreter's, a service's) keep their
// settings, and calls from several threads at once share these workers
// instead of each starting its own (CTranslate2's inter_threads).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nmt::runtime {

class WorkerPool {
 public:
  explicit WorkerPool(int workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()); }
  // Runs every job on the pool's threads (in order of submission, as workers
  // come free) and returns when all have ended; the first exception one of
  // them threw is rethrown here (the others still run to their end).
  void run(const std::vector<std::function<void()>>& jobs);

 private:
  struct Batch;
  void work();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<const std::function<void()>*, Batch*>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace nmt::runtime
