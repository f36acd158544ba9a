// Data-parallel training on LibTorch's c10d: rendezvous through a TCPStore
// (rank 0 hosts it), gradients summed with ProcessGroupGloo (CPU) or
// ProcessGroupNCCL (CUDA builds on a CUDA device). The ranks are described by
// the variables torchrun sets (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK,
// LOCAL_RANK), so any launcher works; `nmt train --nproc N` is one
// (cli/launcher.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "train/gradient_sync.h"

namespace nmt {

struct DistributedEnv {
  int64_t rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  // How long a collective may wait for the other ranks (NMT_DIST_TIMEOUT,
  // seconds) before the job fails naming the ranks that did not arrive.
  std::chrono::seconds timeout{300};
  // How often the group was restarted after a failure (TORCHELASTIC_RESTART_COUNT,
  // set by `nmt train --max-restarts` and by torchrun): a restarted group
  // resumes from its run folder's last checkpoint.
  int64_t restart_count = 0;

  bool active() const { return world_size > 1; }
};

// From the environment; one process when WORLD_SIZE is unset. InputError
// naming the variable when one is malformed or inconsistent.
DistributedEnv distributed_env_from_environment();

class ProcessGroupHandle;

// Sums gradients over the ranks: the flat gradient buffer
// (ops/adam/flat_adam.h) is cut into buckets of about kBucketBytes, from its
// end (the last layers' gradients are ready first); a bucket is all-reduced
// as soon as every parameter in it has its gradient (hooks on the gradient
// accumulators), in bucket order so that all ranks issue the same sequence
// of collectives, while the backward pass goes on.
class C10dGradientSync final : public GradientSync {
 public:
  static constexpr int64_t kBucketBytes = 4 << 20;

  C10dGradientSync(const DistributedEnv& env, const c10::Device& device);
  ~C10dGradientSync() override;

  int64_t rank() const override { return env_.rank; }
  int64_t world_size() const override { return env_.world_size; }
  void attach(const at::Tensor& flat_grad, const std::vector<at::Tensor>& params) override;
  void before_backward() override;
  void after_backward() override;
  void sum(std::vector<at::Tensor>& tensors) override;
  void broadcast(at::Tensor& t, int64_t root) override;
  void note_step(int64_t step) override;
  void finish() override;
  std::string set_and_wait(const std::string& key, const std::string& value) override;
  SyncStats stats() const override { return stats_; }

  // Called from the autograd hook of parameter `index`.
  void gradient_ready(size_t index);

 private:
  struct Bucket {
    int64_t begin = 0, end = 0;  // slice of the flat gradient buffer
    int64_t pending = 0;         // parameters whose gradient has not arrived
    int64_t params = 0;
  };
  void launch_ready_buckets();
  // Throws the one line that says what failed, after how long, and where the
  // other ranks were.
  [[noreturn]] void fail(const std::string& what, const std::exception& e,
                         std::chrono::steady_clock::time_point since);

  DistributedEnv env_;
  std::unique_ptr<ProcessGroupHandle> group_;
  at::Tensor flat_grad_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_param_;
  size_t next_launch_ = 0;
  std::vector<std::shared_ptr<void>> hooked_;  // keeps the gradient accumulators alive
  std::mutex mutex_;  // hooks may run on several autograd threads (CUDA)
  int64_t step_ = 0;
  SyncStats stats_;
};

}  // namespace nmt
