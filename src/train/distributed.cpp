// c10d wiring: TCPStore rendezvous, ProcessGroupGloo (CPU) or
// ProcessGroupNCCL (CUDA builds), bucketed gradient all-reduce overlapped
// with the backward pass. See distributed.h.
#include "train/distributed.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

// The c10d process groups are compiled into LibTorch; their headers are
// guarded by the build options LibTorch was configured with.
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef NMT_WITH_CUDA
#define USE_C10D_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "util/errors.h"

namespace nmt {

namespace {

int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi)
    throw InputError(std::string(name) + ": '" + v + "' is not an integer in " + std::to_string(lo) +
                     ".." + std::to_string(hi));
  return x;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace

DistributedEnv distributed_env_from_environment() {
  DistributedEnv e;
  e.world_size = env_int("WORLD_SIZE", 1, 1, 4096);
  e.rank = env_int("RANK", 0, 0, e.world_size - 1);
  e.local_rank = env_int("LOCAL_RANK", e.rank, 0, 4095);
  e.master_port = env_int("MASTER_PORT", 29500, 1, 65535);
  e.timeout = std::chrono::seconds(env_int("NMT_DIST_TIMEOUT", 300, 1, 86400));
  e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0, 0, 1000000);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) e.master_addr = addr;
  else if (e.world_size > 1 && std::getenv("RANK"))
    spdlog::warn("distributed: MASTER_ADDR unset, using {}", e.master_addr);
  return e;
}

// The store, the process group and the reductions in flight.
class ProcessGroupHandle {
 public:
  ProcessGroupHandle(const DistributedEnv& env, const c10::Device& device) : env_(env) {
    // Gloo writes to its peers' sockets without MSG_NOSIGNAL: when a peer
    // dies, the next write would kill this rank with SIGPIPE, silently, and
    // the launcher could blame this rank for the other's death. Ignored, the
    // write fails and the collective throws, naming the lost peer. (Python
    // ignores SIGPIPE at start-up, so PyTorch users never meet this.)
    std::signal(SIGPIPE, SIG_IGN);
    c10d::TCPStoreOptions store_opts;
    store_opts.port = static_cast<uint16_t>(env.master_port);
    store_opts.isServer = env.rank == 0;
    store_opts.numWorkers = static_cast<size_t>(env.world_size);
    store_opts.timeout = env.timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_opts);
#ifdef NMT_WITH_CUDA
    if (device.is_cuda()) {
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = env.timeout;
      nccl_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, env.rank, env.world_size, opts);
      return;
    }
#endif
    auto opts = c10d::ProcessGroupGloo::Options::create(env.timeout);
    // GLOO_SOCKET_IFNAME picks the network interface (as with PyTorch);
    // otherwise loopback for a local job, the host's name for others.
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (is_loopback(env.master_addr))
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 2;
    gloo_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, env.rank, env.world_size, opts);
  }

  // Starts summing t over all ranks, in place.
  void allreduce_async(const at::Tensor& t) {
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
#ifdef NMT_WITH_CUDA
    if (nccl_) {
      works_.push_back(nccl_->allreduce(tensors, opts));
      return;
    }
#endif
    works_.push_back(gloo_->allreduce(tensors, opts));
  }

  // Starts copying root's t to every rank.
  void broadcast_async(const at::Tensor& t, int64_t root) {
    std::vector<at::Tensor> tensors{t};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
#ifdef NMT_WITH_CUDA
    if (nccl_) {
      works_.push_back(nccl_->broadcast(tensors, opts));
      return;
    }
#endif
    works_.push_back(gloo_->broadcast(tensors, opts));
  }

  // Waits for every reduction started; throws what the group reported.
  void wait_all() {
    for (auto& w : works_) w->wait();
    works_.clear();
  }

  c10d::Store& store() { return *store_; }

 private:
  DistributedEnv env_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_;
#ifdef NMT_WITH_CUDA
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl_;
#endif
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

namespace {

struct ReadyHook : public torch::autograd::FunctionPostHook {
  ReadyHook(C10dGradientSync* sync, size_t index) : sync(sync), index(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    sync->gradient_ready(index);
    return outputs;
  }
  C10dGradientSync* sync;
  size_t index;
};

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string string_of(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

C10dGradientSync::C10dGradientSync(const DistributedEnv& env, const c10::Device& device)
    : env_(env) {
  try {
    group_ = std::make_unique<ProcessGroupHandle>(env, device);
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    throw std::runtime_error("distributed: rank " + std::to_string(env.rank) + " of " +
                             std::to_string(env.world_size) + " could not join the group at " +
                             env.master_addr + ":" + std::to_string(env.master_port) + " within " +
                             std::to_string(env.timeout.count()) + " s: " + msg.substr(0, msg.find('\n')));
  }
}

C10dGradientSync::~C10dGradientSync() = default;

void C10dGradientSync::attach(const at::Tensor& flat_grad, const std::vector<at::Tensor>& params) {
  flat_grad_ = flat_grad;
  const int64_t total = flat_grad.numel(), elem = flat_grad.element_size();
  const auto* base = static_cast<const char*>(flat_grad.data_ptr());
  // Offsets of the parameters' gradients in the flat buffer.
  std::vector<std::pair<int64_t, size_t>> by_offset;  // (offset, parameter index)
  for (size_t i = 0; i < params.size(); ++i) {
    const auto* g = static_cast<const char*>(params[i].grad().data_ptr());
    by_offset.emplace_back((g - base) / elem, i);
  }
  std::sort(by_offset.rbegin(), by_offset.rend());
  // Buckets from the end of the buffer, cut at parameter offsets once they
  // reach kBucketBytes; together they cover all of it.
  bucket_of_param_.assign(params.size(), 0);
  buckets_.clear();
  int64_t end = total, bytes = 0;
  std::vector<size_t> members;
  for (size_t k = 0; k < by_offset.size(); ++k) {
    const auto [offset, index] = by_offset[k];
    members.push_back(index);
    bytes = (end - offset) * elem;
    const bool last = k + 1 == by_offset.size();
    if (bytes >= kBucketBytes || last) {
      const int64_t begin = last ? 0 : offset;
      for (size_t m : members) bucket_of_param_[m] = buckets_.size();
      buckets_.push_back({begin, end, 0, static_cast<int64_t>(members.size())});
      members.clear();
      end = begin;
    }
  }
  // Hooks that fire once a parameter's gradient is accumulated.
  for (size_t i = 0; i < params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    acc->add_post_hook(std::make_unique<ReadyHook>(this, i));
    // A shared_ptr (LibTorch 1.x) or an intrusive_ptr (2.x): held as either.
    hooked_.push_back(std::make_shared<decltype(acc)>(acc));
  }
  spdlog::info("distributed: rank {} of {}, {} gradient buckets of about {} MB ({} MB in all)",
               env_.rank, env_.world_size, buckets_.size(), kBucketBytes >> 20,
               total * elem / (1 << 20));
}

void C10dGradientSync::before_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : buckets_) b.pending = b.params;
  next_launch_ = 0;
}

void C10dGradientSync::gradient_ready(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  --buckets_[bucket_of_param_[index]].pending;
  launch_ready_buckets();
}

void C10dGradientSync::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending <= 0) {
    const Bucket& b = buckets_[next_launch_++];
    group_->allreduce_async(flat_grad_.narrow(0, b.begin, b.end - b.begin));
  }
}

void C10dGradientSync::after_backward() {
  const auto t0 = std::chrono::steady_clock::now();
  {
    // Buckets still waiting (a rank without rows runs no backward; an unused
    // parameter never gets a gradient) go now, in order: their gradients are zero.
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& b : buckets_) b.pending = 0;
    launch_ready_buckets();
  }
  try {
    group_->wait_all();
  } catch (const std::exception& e) {
    fail("gradient all-reduce", e, t0);
  }
  stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.bytes += static_cast<double>(flat_grad_.numel() * flat_grad_.element_size());
  ++stats_.steps;
}

void C10dGradientSync::sum(std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return;
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}).to(at::kDouble));
  at::Tensor all = at::cat(flat);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    group_->allreduce_async(all);
    group_->wait_all();
  } catch (const std::exception& e) {
    fail("all-reduce of the loss", e, t0);
  }
  int64_t at = 0;
  for (auto& t : tensors) {
    t = all.narrow(0, at, t.numel()).view(t.sizes()).to(t.scalar_type());
    at += t.numel();
  }
}

void C10dGradientSync::broadcast(at::Tensor& t, int64_t root) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    group_->broadcast_async(t, root);
    group_->wait_all();
  } catch (const std::exception& e) {
    fail("broadcast from rank " + std::to_string(root), e, t0);
  }
}

void C10dGradientSync::note_step(int64_t step) {
  step_ = step;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    group_->store().set("step/" + std::to_string(env_.rank), bytes_of(std::to_string(step)));
  } catch (const std::exception& e) {
    fail("reporting progress to the rank 0 store", e, t0);
  }
}

namespace {

// The store's client keeps the timeout of its last wait as its socket's
// receive timeout (LibTorch 1.13 and 2.x), and a check or add after a long
// wait would inherit it: a wait on a key that exists returns at once and
// bounds every later round trip on this connection by `t`. Without it, a
// partitioned link leaves a rank blocked in recv() for as long as the last
// wait allowed.
void bound_round_trips(c10d::Store& store, int64_t rank, std::chrono::milliseconds t) {
  const std::string key = "alive/" + std::to_string(rank);
  store.set(key, bytes_of("1"));
  store.wait({key}, t);
}

}  // namespace

void C10dGradientSync::finish() {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c10d::Store& store = group_->store();
    if (store.add("finished", 1) == env_.world_size) store.set("finished/all", bytes_of("1"));
    if (env_.rank != 0) return;
    // Rank 0 hosts the store: leaving now would cut off a rank still reading
    // the last outcome from it (it would fail with a broken pipe although the
    // run ended well). So it stays until every rank has said it is done.
    store.wait({"finished/all"}, env_.timeout);
  } catch (const std::exception& e) {
    // The run is complete and saved; a rank that cannot confirm it fails on its own.
    std::string msg = e.what();
    spdlog::warn("distributed: rank {}: not every rank confirmed the end of the run within {} s: {}",
                 env_.rank, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 msg.substr(0, msg.find('\n')));
  }
}

std::string C10dGradientSync::set_and_wait(const std::string& key, const std::string& value) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c10d::Store& store = group_->store();
    if (env_.rank == 0) {
      store.set("value/" + key, bytes_of(value));
      return value;
    }
    // Rank 0 may evaluate or save for longer than the timeout. A single long
    // wait would also wait that long on a dead link, so the key is polled
    // instead: every poll is a round trip bounded by the timeout, which ends
    // the wait once rank 0's host stops answering (killed: at once; cut off:
    // after the timeout), while a busy but reachable rank 0 is waited for.
    bound_round_trips(store, env_.rank, env_.timeout);
    const std::string k = "value/" + key;
    auto pause = std::chrono::milliseconds(5);
    while (!store.check({k})) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
    return string_of(store.get(k));
  } catch (const std::exception& e) {
    fail("waiting for rank 0 (" + key + ")", e, t0);
  }
}

void C10dGradientSync::fail(const std::string& what, const std::exception& e,
                            std::chrono::steady_clock::time_point since) {
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  // Name the ranks that fell behind or vanished, from the steps they
  // reported. Another rank bounds these round trips by a few seconds, so it
  // still exits soon after the timeout when the store is cut off too. Rank 0
  // hosts the store in its own process and cannot be cut off from it, but a
  // loaded host can keep the store's thread from answering within a second
  // (seen once on a 2-core machine running other tests), so it waits longer.
  std::string ranks;
  try {
    c10d::Store& store = group_->store();
    const std::chrono::milliseconds bound = env_.rank == 0 ? std::chrono::seconds(10) : std::chrono::seconds(3);
    bound_round_trips(store, env_.rank, std::min<std::chrono::milliseconds>(env_.timeout, bound));
    for (int64_t r = 0; r < env_.world_size; ++r) {
      if (r == env_.rank) continue;
      const std::string key = "step/" + std::to_string(r);
      std::string at = "never reported";
      if (store.check({key})) at = "at step " + string_of(store.get(key));
      ranks += (ranks.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " " + at);
    }
  } catch (const std::exception& store_error) {
    std::string why = store_error.what();
    ranks = "the rank 0 store is unreachable (rank 0 stopped or cut off?): " + why.substr(0, why.find('\n'));
  }
  std::string msg = e.what();
  msg = msg.substr(0, msg.find('\n'));
  throw std::runtime_error(fmt::format("distributed: rank {} at step {}: {} failed after {:.1f} s (NMT_DIST_TIMEOUT "
                                       "{} s; {}): a rank died, hung or was cut off; {}",
                                       env_.rank, step_, what, took, env_.timeout.count(), ranks, msg));
}

}  // namespace nmt
