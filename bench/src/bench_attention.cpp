// `nmt bench-attention`. The parent only plans, spawns and reports: every case
// (and the sgemm roofline) runs in a fresh child, `/proc/self/exe
// bench-attention --case SPEC ...`, because a resident-memory high-water mark
// can only be attributed to one case if nothing else ever ran in that process.
//
// peak_mb, CPU: the child allocates the inputs (q, k, v and, for fwd+bwd, the
// output gradient), starts the intra-op thread pool, resets the process's RSS
// high-water mark (/proc/self/clear_refs) and takes VmRSS as the baseline;
// after warm-up and the timed runs, peak_mb = VmHWM - baseline. So it is the
// memory a case needs on top of its inputs: outputs, gradients, saved
// activations, workspaces and first-call allocations (BLAS buffers) included.
// Memory glibc frees and reuses within the case is counted once, as it is
// resident only once. peak_mb, CUDA: the same, from the caching allocator's
// allocated-bytes statistics (reset after the inputs exist).
#include "cli/options.h"
#include "bench/src/bench_attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
namespace nmt::bench {
// The allocator's statistics moved from the CUDA allocator to a shared one in 2.x.
#if TORCH_VERSION_MAJOR >= 2
using AllocStat = c10::CachingAllocator::StatType;
#else
using AllocStat = c10::cuda::CUDACachingAllocator::StatType;
#endif
}  // namespace nmt::bench
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "ops/attention/attention.h"
#include "util/device.h"
#include "util/atomic_file.h"
#include "util/errors.h"

extern char** environ;

namespace nmt::bench {
namespace {

constexpr const char* kResultTag = "nmt-bench-result";
constexpr const char* kSkipTag = "nmt-bench-skip";
constexpr const char* kSdpaChoices[] = {"auto", "flash", "efficient", "cudnn", "math"};
// Share of physical RAM (or the cgroup limit) one case may be estimated to
// need on the CPU; the rest is for the OS and everything else on the machine.
constexpr double kCpuMemoryShare = 0.40;
// A GPU is not shared with an OS, but the CUDA context and fragmentation are.
constexpr double kCudaMemoryShare = 0.80;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Case {
  std::string backend;  // torch | naive | flash | sgemm
  std::string pass;     // fwd | fwd+bwd
  int64_t batch = 0, heads = 0, q_len = 0, k_len = 0, head_dim = 0;
  bool causal = false;
};

struct Row {
  Case c;
  double ms = 0, gflops = 0, peak_mb = 0;
  std::string kernel;  // the torch backend on CUDA: the SDPA kernel LibTorch ran
};

std::string case_spec(const Case& c) {
  std::ostringstream s;
  s << c.backend << ':' << c.pass << ':' << c.batch << ':' << c.heads << ':' << c.q_len << ':'
    << c.k_len << ':' << c.head_dim << ':' << (c.causal ? 1 : 0);
  return s.str();
}

std::string case_label(const Case& c) {
  std::ostringstream s;
  s << c.backend << ' ' << c.pass << " B=" << c.batch << " H=" << c.heads << " Tq=" << c.q_len
    << " Tk=" << c.k_len << " D=" << c.head_dim << " causal=" << (c.causal ? 1 : 0);
  return s.str();
}

Case parse_case_spec(const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream in(spec);
  for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
  const std::string form = "backend:pass:B:H:Tq:Tk:D:causal";
  if (parts.size() != 8) throw InputError("--case '" + spec + "': expected " + form);
  Case c;
  c.backend = parts[0];
  c.pass = parts[1];
  if (c.backend != "sgemm") ops::parse_backend(c.backend);
  if (c.pass != "fwd" && c.pass != "fwd+bwd")
    throw InputError("--case '" + spec + "': pass must be fwd or fwd+bwd");
  int64_t* fields[] = {&c.batch, &c.heads, &c.q_len, &c.k_len, &c.head_dim};
  for (size_t i = 0; i < 5; ++i) {
    const std::string& p = parts[2 + i];
    char* end = nullptr;
    const long long value = std::strtoll(p.c_str(), &end, 10);
    if (p.empty() || *end != '\0' || value < 1)
      throw InputError("--case '" + spec + "': '" + p + "' is not a positive integer (" + form +
                       ")");
    *fields[i] = value;
  }
  if (parts[7] != "0" && parts[7] != "1")
    throw InputError("--case '" + spec + "': causal must be 0 or 1");
  c.causal = parts[7] == "1";
  return c;
}

double case_flops(const Case& c) {
  if (c.backend == "sgemm") return 2.0 * c.q_len * c.k_len * c.head_dim;
  // QKᵀ and PV: 2 multiply-adds each per (query, key, dim); causal skips half.
  double fwd = 4.0 * c.batch * c.heads * c.q_len * c.k_len * c.head_dim;
  if (c.causal) fwd /= 2;
  return c.pass == "fwd" ? fwd : 3.5 * fwd;
}

// A deliberately generous estimate of what a case holds at its peak, to skip
// the ones that would push the machine into swap or the OOM killer. S is one
// float32 [B,H,Tq,Tk] matrix, the term that dominates for long sequences.
double estimated_bytes(const Case& c) {
  const double f = 4.0;  // float32
  if (c.backend == "sgemm") return 3.0 * c.q_len * c.k_len * f;
  const double bh = static_cast<double>(c.batch) * c.heads;
  const double inputs = bh * (c.q_len + 2.0 * c.k_len) * c.head_dim * f;
  const double out = bh * c.q_len * c.head_dim * f;
  const double s = bh * c.q_len * c.k_len * f;
  const bool bwd = c.pass == "fwd+bwd";
  double extra = out + (bwd ? inputs + out : 0.0);  // output (+ dq, dk, dv, dO)
  if (c.backend == "naive") {
    extra += bwd ? 2 * s : s;  // P, kept for backward (+ dS)
  } else if (c.backend == "torch") {
    // LibTorch 1.13's math path: scores, masked scores and softmax live
    // together; its backward adds dP and dS beside the saved P. (Measured at
    // T=512: about 3 S forward, 4.5 S forward+backward.)
    extra += bwd ? 5 * s : 3 * s;
    if (c.causal) extra += s / 4;  // the boolean mask
  }
  return inputs + extra;
}

// Physical RAM, or the cgroup's limit when that is lower.
double memory_total_bytes() {
  double total = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kb = 0;
    meminfo >> kb;
    if (key == "MemTotal:") total = kb * 1024.0;
    meminfo.ignore(1 << 10, '\n');
  }
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(path);
    double limit = 0;
    if (f >> limit && limit > 0 && (total == 0 || limit < total)) total = limit;
  }
  return total;
}

// Reads a "Key:   N kB" line of /proc/self/status, in bytes; -1 if absent.
double proc_status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.compare(0, key.size() + 1, key + ":") == 0)
      return std::atof(line.c_str() + key.size() + 1) * 1024.0;
  }
  return -1;
}

// The 1-minute load average: timings on a machine others are using are slow
// and noisy, and the table should say so rather than be trusted blindly.
double load_average() {
  double load = -1;
  std::ifstream f("/proc/loadavg");
  f >> load;
  return load;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---------------------------------------------------------------- the child

// Leaves only the named SDPA kernel switched on (math too is switched off
// unless named: a case the kernel refuses then fails, visibly, instead of
// timing another kernel under its name).
void restrict_sdpa(const std::string& kernel) {
#if TORCH_VERSION_MAJOR >= 2
  auto& ctx = at::globalContext();
  ctx.setSDPUseFlash(kernel == "flash");
  ctx.setSDPUseMemEfficient(kernel == "efficient");
  ctx.setSDPUseMath(kernel == "math");
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 3  // cuDNN's SDPA arrived in 2.3
  ctx.setSDPUseCuDNN(kernel == "cudnn");
#else
  if (kernel == "cudnn") throw InputError("--sdpa cudnn: needs LibTorch 2.3 or later");
#endif
#else
  (void)kernel;  // unreachable: run_bench_attention refuses --sdpa before LibTorch 2.x
#endif
}

// The SDPA kernel LibTorch picks for this case's call (attention_torch passes
// no mask for the cases planned here: causal ones are square).
std::string sdpa_kernel_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const Case& c) {
#if TORCH_VERSION_MAJOR >= 2
  if (c.causal && c.q_len != c.k_len) return "masked";
  // at::SDPBackend's values, stable since 2.0 (its header is not in every 2.x).
  const int64_t choice = at::_fused_sdp_choice(q, k, v, {}, 0.0, c.causal);
  switch (choice) {
    case 0: return "math";
    case 1: return "flash";
    case 2: return "efficient";
    case 3: return "cudnn";
    default: return "other(" + std::to_string(choice) + ")";
  }
#else
  (void)q, (void)k, (void)v, (void)c;
  return "math";
#endif
}

int run_single_case(const BenchArgs& args) {
  const Case c = parse_case_spec(args.single_case);
  const c10::Device device = resolve_device(kDeviceChoices.parse(args.device, "--device"), "--device");
  const bool cuda = device.is_cuda();
#ifdef NMT_WITH_CUDA
  const int cuda_index = device.index() < 0 ? 0 : device.index();  // "cuda" = the current one
#endif
  const int64_t threads = set_threads(args.threads);

  double budget = kCpuMemoryShare * memory_total_bytes();
  const char* budget_what = "of RAM";
#ifdef NMT_WITH_CUDA
  if (cuda) {
    budget = kCudaMemoryShare *
             static_cast<double>(at::cuda::getDeviceProperties(cuda_index)->totalGlobalMem);
    budget_what = "of GPU memory";
  }
#endif
  const double need = estimated_bytes(c);
  if (budget > 0 && need > budget) {
    std::printf("%s needs ~%.1f GiB, over %.0f%% %s (%.1f GiB)\n", kSkipTag, need / kGiB,
                100 * (cuda ? kCudaMemoryShare : kCpuMemoryShare), budget_what, budget / kGiB);
    return kExitOk;
  }

  if (args.sdpa != "auto") restrict_sdpa(args.sdpa);

  at::manual_seed(0);
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  // The attention inputs (and dO) in the dtype asked for; sgemm stays float32.
  const auto attn_opts_t = opts.dtype(args.dtype == "bf16" ? at::kBFloat16 : at::kFloat);
  const bool bwd = c.pass == "fwd+bwd";
  std::function<void()> call;
  at::Tensor q, k, v, grad, a, b;
  ops::AttentionOptions attn_opts;
  attn_opts.causal = c.causal;
  if (c.backend == "sgemm") {
    a = at::randn({c.q_len, c.head_dim}, opts);
    b = at::randn({c.head_dim, c.k_len}, opts);
    call = [&] {
      at::NoGradGuard no_grad;
      at::matmul(a, b);
    };
  } else {
    const ops::AttentionBackend backend = ops::parse_backend(c.backend);
    q = at::randn({c.batch, c.heads, c.q_len, c.head_dim}, attn_opts_t);
    k = at::randn({c.batch, c.heads, c.k_len, c.head_dim}, attn_opts_t);
    v = at::randn({c.batch, c.heads, c.k_len, c.head_dim}, attn_opts_t);
    if (!bwd) {
      call = [&, backend] {
        at::NoGradGuard no_grad;
        ops::attention(q, k, v, attn_opts, backend);
      };
    } else {
      for (at::Tensor* t : {&q, &k, &v}) t->requires_grad_(true);
      grad = at::randn({c.batch, c.heads, c.q_len, c.head_dim}, attn_opts_t);
      call = [&, backend] {
        ops::attention(q, k, v, attn_opts, backend).backward(grad);
        // Dropped rather than zeroed: every run then allocates its gradients
        // afresh, as a training step would, and none accumulates.
        for (at::Tensor* t : {&q, &k, &v}) t->mutable_grad().reset();
      };
    }
  }
  // The thread pool's start-up belongs to the process, not to the case.
  at::parallel_for(0, threads, 1, [](int64_t, int64_t) {});
  const auto sync = [&] {
    if (cuda) torch::cuda::synchronize();
  };
  sync();

  double baseline = 0;
  bool hwm_reset = false;
#ifdef NMT_WITH_CUDA
  if (cuda) {
    namespace alloc = c10::cuda::CUDACachingAllocator;
    alloc::resetPeakStats(cuda_index);
    baseline =
        static_cast<double>(alloc::getDeviceStats(cuda_index)
                                .allocated_bytes[static_cast<size_t>(AllocStat::AGGREGATE)]
                                .current);
  }
#endif
  if (!cuda) {
    // "5" resets VmHWM to the current RSS (Linux >= 4.0). Without it the mark
    // would still include whatever start-up peaked at, so say so.
    std::ofstream clear("/proc/self/clear_refs");
    hwm_reset = static_cast<bool>(clear << "5" << std::flush);
    baseline = proc_status_bytes("VmRSS");
    if (!hwm_reset) spdlog::warn("bench-attention: cannot reset VmHWM; peak_mb may be too high");
  }

  using Clock = std::chrono::steady_clock;
  const auto timed = [&](int n) {
    sync();
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) call();
    sync();
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  // Warm-up: the first call pays for lazy initialisation; a second one only
  // when the first was short enough not to dominate the run.
  double warm_ms = timed(1);
  if (!args.quick && warm_ms < 1000) warm_ms = timed(1);
  // Short calls are repeated inside one timed sample so that the clock and
  // launch overheads stay well below the time measured.
  const double target_ms = args.quick ? 5.0 : 20.0;
  const int inner =
      static_cast<int>(std::clamp(std::ceil(target_ms / std::max(warm_ms, 1e-3)), 1.0, 1000.0));
  std::vector<double> samples;
  for (int r = 0; r < std::max(1, args.repeats); ++r) samples.push_back(timed(inner) / inner);

  double peak = 0;
#ifdef NMT_WITH_CUDA
  if (cuda) {
    namespace alloc = c10::cuda::CUDACachingAllocator;
    peak = static_cast<double>(alloc::getDeviceStats(cuda_index)
                                   .allocated_bytes[static_cast<size_t>(AllocStat::AGGREGATE)]
                                   .peak) -
           baseline;
  }
#endif
  if (!cuda) peak = proc_status_bytes("VmHWM") - baseline;
  const std::string kernel = cuda && c.backend == "torch" ? sdpa_kernel_of(q, k, v, c) : "";
  std::printf("%s ms_median=%.6f peak_mb=%.3f repeats=%zu inner=%d threads=%lld kernel=%s\n",
              kResultTag, median(samples), std::max(0.0, peak) / (1024.0 * 1024.0), samples.size(),
              inner, static_cast<long long>(threads), kernel.empty() ? "-" : kernel.c_str());
  std::fflush(stdout);
  return kExitOk;
}

// --------------------------------------------------------------- the parent

struct ChildOutcome {
  enum Kind { kOk, kSkipped, kFailed } kind = kFailed;
  double ms = 0, peak_mb = 0;
  std::string kernel;  // "" unless the child named one
  std::string note;
};

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw std::runtime_error("bench-attention: cannot read /proc/self/exe");
  return std::string(buf, static_cast<size_t>(n));
}

double field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return std::nan("");
  return std::atof(line.c_str() + at + key.size() + 2);
}

// An unlinked temporary file for the child's stderr: read back afterwards so
// that a failure's own message lands in the table, not only above it.
int open_scratch_file() {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/nmt-bench-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd >= 0) unlink(path.c_str());
  return fd;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Spawns the child for one case and reads its result line from a pipe.
// posix_spawn rather than a shell: no quoting.
ChildOutcome run_child(const std::string& exe, const Case& c, const BenchArgs& args) {
  std::vector<std::string> argv_s = {exe,         "bench-attention",
                                     "--case",    case_spec(c),
                                     "--device",  args.device,
                                     "--threads", std::to_string(args.threads),
                                     "--repeats", std::to_string(args.repeats),
                                     "--dtype",   args.dtype,
                                     "--sdpa",    args.sdpa};
  if (args.quick) argv_s.push_back("--quick");
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);

  int fds[2];
  if (pipe(fds) != 0)
    throw std::runtime_error(std::string("bench-attention: pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  const int err_fd = open_scratch_file();
  if (err_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, err_fd);
  }
  pid_t pid = 0;
  const int err = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    if (err_fd >= 0) close(err_fd);
    throw std::runtime_error("bench-attention: cannot start " + exe + ": " + std::strerror(err));
  }
  const std::string out = read_all(fds[0]);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string err_text, last_err_line;
  if (err_fd >= 0) {
    lseek(err_fd, 0, SEEK_SET);
    err_text = read_all(err_fd);
    close(err_fd);
    std::cerr << err_text << std::flush;  // warnings and errors stay visible
    std::istringstream err_lines(err_text);
    for (std::string line; std::getline(err_lines, line);)
      if (!line.empty()) last_err_line = line;
  }

  ChildOutcome r;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(kResultTag, 0) == 0) {
      r.ms = field(line, "ms_median");
      r.peak_mb = field(line, "peak_mb");
      r.kind = std::isfinite(r.ms) && std::isfinite(r.peak_mb) ? ChildOutcome::kOk
                                                               : ChildOutcome::kFailed;
      if (r.kind == ChildOutcome::kFailed) r.note = "unreadable result line: " + line;
      const size_t at = line.find(" kernel=");
      if (at != std::string::npos) {
        r.kernel = line.substr(at + 8, line.find(' ', at + 8) - (at + 8));
        if (r.kernel == "-") r.kernel.clear();
      }
    } else if (line.rfind(kSkipTag, 0) == 0) {
      r.kind = ChildOutcome::kSkipped;
      r.note = line.substr(std::strlen(kSkipTag) + 1);
    } else if (!line.empty()) {
      std::cerr << line << '\n';  // not ours (a library's chatter): pass it on
    }
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    r.kind = ChildOutcome::kFailed;
    r.note = "child killed by signal " + std::to_string(sig) +
             (sig == SIGKILL ? " (out of memory?)" : "");
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    r.kind = ChildOutcome::kFailed;
    r.note = "child exited with code " + std::to_string(WEXITSTATUS(status)) +
             (last_err_line.empty() ? "" : ": " + last_err_line);
  } else if (r.kind == ChildOutcome::kFailed && r.note.empty()) {
    r.note = "child printed no result line";
  }
  return r;
}

std::vector<Case> plan_cases(const BenchArgs& args, const std::vector<std::string>& backends,
                             bool cuda) {
  struct Shape {
    int64_t batch, heads, q_len, k_len, head_dim;
    bool causal_too;
  };
  const bool quick = args.quick;
  std::vector<Shape> shapes;
  std::vector<int64_t> self_lens =
      quick ? std::vector<int64_t>{128, 512} : std::vector<int64_t>{128, 512, 2048};
  if (cuda && !quick) self_lens.insert(self_lens.end(), {4096, 16384});
  std::vector<int64_t> dims = {64};
  if (cuda && !quick) dims.push_back(128);
  const bool chosen = !args.lens.empty() || !args.head_dims.empty();
  if (!args.lens.empty()) self_lens = args.lens;
  if (!args.head_dims.empty()) dims = args.head_dims;
  for (int64_t d : dims)
    for (int64_t t : self_lens) shapes.push_back({8, 8, t, t, d, true});
  shapes.push_back({8, 8, 64, 512, 64, false});  // cross-attention: no causal mask
  if (!quick && !chosen)
    for (int64_t t : {8192, 16384}) shapes.push_back({1, 8, t, t, 64, true});

  std::vector<Case> cases;
  for (const Shape& s : shapes)
    for (const std::string& backend : backends)
      for (const char* pass : {"fwd", "fwd+bwd"})
        for (bool causal : {false, true}) {
          if (causal && !s.causal_too) continue;
          cases.push_back({backend, pass, s.batch, s.heads, s.q_len, s.k_len, s.head_dim, causal});
        }
  return cases;
}

void print_table_header() {
  std::printf("%-7s %-8s %3s %3s %6s %6s %5s %6s %12s %10s %10s  %s\n", "backend", "pass", "B",
              "H", "Tq", "Tk", "D", "causal", "ms_median", "GFLOP/s", "peak_mb", "kernel");
  std::fflush(stdout);
}

void print_row(const Row& r) {
  const Case& c = r.c;
  std::printf("%-7s %-8s %3lld %3lld %6lld %6lld %5lld %6d %12.3f %10.2f %10.1f  %s\n",
              c.backend.c_str(), c.pass.c_str(), static_cast<long long>(c.batch),
              static_cast<long long>(c.heads), static_cast<long long>(c.q_len),
              static_cast<long long>(c.k_len), static_cast<long long>(c.head_dim), c.causal ? 1 : 0,
              r.ms, r.gflops, r.peak_mb, r.kernel.empty() ? "-" : r.kernel.c_str());
  std::fflush(stdout);
}

const Row* find_row(const std::vector<Row>& rows, const std::string& backend,
                    const std::string& pass, int64_t batch, int64_t t, int64_t d, bool causal) {
  for (const Row& r : rows)
    if (r.c.backend == backend && r.c.pass == pass && r.c.batch == batch && r.c.heads == 8 &&
        r.c.q_len == t && r.c.k_len == t && r.c.head_dim == d && r.c.causal == causal)
      return &r;
  return nullptr;
}

// The headline numbers, all from this run so that they share one machine state.
void print_ratios(const std::vector<Row>& rows) {
  std::printf("\nratios (same run):\n");
  const auto speedup = [&](const char* pass) {
    const Row* torch = find_row(rows, "torch", pass, 8, 512, 64, false);
    const Row* flash = find_row(rows, "flash", pass, 8, 512, 64, false);
    if (torch && flash)
      std::printf(
          "  flash %-7s speed-up vs torch, B=8 H=8 T=512 D=64:  %.2fx  (%.3f ms vs %.3f ms)\n",
          pass, torch->ms / flash->ms, flash->ms, torch->ms);
    else
      std::printf("  flash %-7s speed-up vs torch, B=8 H=8 T=512 D=64:  n/a (not run)\n", pass);
  };
  speedup("fwd");
  speedup("fwd+bwd");

  const Row* sgemm = nullptr;
  for (const Row& r : rows)
    if (r.c.backend == "sgemm") sgemm = &r;
  const Row* flash512 = find_row(rows, "flash", "fwd", 8, 512, 64, false);
  if (sgemm && flash512)
    std::printf(
        "  flash fwd GFLOP/s as %% of sgemm, T=512:           %.1f%%  (%.1f vs %.1f GFLOP/s)\n",
        100 * flash512->gflops / sgemm->gflops, flash512->gflops, sgemm->gflops);
  else
    std::printf("  flash fwd GFLOP/s as %% of sgemm, T=512:           n/a (not run)\n");

  // T=2048 as specified; a --quick run reports its longest self-attention T.
  int64_t t_causal = 0;
  for (const Row& r : rows)
    if (r.c.backend == "flash" && r.c.pass == "fwd" && r.c.batch == 8 && r.c.q_len == r.c.k_len &&
        r.c.q_len <= 2048 && r.c.head_dim == 64 &&
        find_row(rows, "flash", "fwd", 8, r.c.q_len, 64, true) &&
        find_row(rows, "flash", "fwd", 8, r.c.q_len, 64, false))
      t_causal = std::max(t_causal, r.c.q_len);
  if (t_causal > 0) {
    const Row* nc = find_row(rows, "flash", "fwd", 8, t_causal, 64, false);
    const Row* ca = find_row(rows, "flash", "fwd", 8, t_causal, 64, true);
    std::printf(
        "  flash fwd causal vs non-causal, T=%-5lld            %.2fx faster  (%.3f ms vs %.3f ms; "
        "2x ideal)\n",
        static_cast<long long>(t_causal), nc->ms / ca->ms, ca->ms, nc->ms);
  } else {
    std::printf("  flash fwd causal vs non-causal, T=2048:           n/a (not run)\n");
  }

  bool any_long = false;
  for (const Row& r : rows)
    if (r.c.backend == "flash" && r.c.pass == "fwd+bwd" && r.c.q_len == 16384 &&
        r.c.k_len == 16384) {
      any_long = true;
      std::printf("  flash fwd+bwd peak_mb, B=%lld H=%lld T=16384 D=%lld causal=%d: %.1f MB\n",
                  static_cast<long long>(r.c.batch), static_cast<long long>(r.c.heads),
                  static_cast<long long>(r.c.head_dim), r.c.causal ? 1 : 0, r.peak_mb);
    }
  if (!any_long) std::printf("  flash fwd+bwd peak_mb, T=16384:                   n/a (not run)\n");
  std::fflush(stdout);
}

void write_csv(const std::string& path, const std::string& device, const std::string& dtype,
               const std::vector<Row>& rows) {
  std::string out =
      "backend,device,dtype,pass,batch,heads,q_len,k_len,head_dim,causal,ms_median,gflops,peak_mb,"
      "kernel\n";
  char line[512];
  for (const Row& r : rows) {
    const Case& c = r.c;
    std::snprintf(line, sizeof(line), "%s,%s,%s,%s,%lld,%lld,%lld,%lld,%lld,%d,%.4f,%.3f,%.2f,%s\n",
                  c.backend.c_str(), device.c_str(),
                  c.backend == "sgemm" ? "float32" : dtype.c_str(), c.pass.c_str(),
                  static_cast<long long>(c.batch),
                  static_cast<long long>(c.heads), static_cast<long long>(c.q_len),
                  static_cast<long long>(c.k_len), static_cast<long long>(c.head_dim),
                  c.causal ? 1 : 0, r.ms, r.gflops, r.peak_mb, r.kernel.c_str());
    out += line;
  }
  write_file_atomic(path, out);
}

int run_parent(const BenchArgs& args_in) {
  BenchArgs args = args_in;
  if (args.quick) args.repeats = std::min(args.repeats, 3);
  const bool cuda = args.device == "cuda";

  std::vector<std::string> backends;
  for (const std::string& b : args.backends) {
    ops::parse_backend(b);  // InputError for an unknown name
    if (std::find(backends.begin(), backends.end(), b) == backends.end()) backends.push_back(b);
  }
  if (backends.empty()) throw InputError("--backends: no backend given (" + ops::backend_choices() + ")");
  if (!args.csv.empty()) {
    // Fail before an hour of measuring, not after.
    std::ofstream probe(args.csv + ".tmp");
    if (!probe) throw InputError("--csv: cannot write " + args.csv + ".tmp");
    probe.close();
    std::remove((args.csv + ".tmp").c_str());
  }

  const std::string exe = self_exe();
  const std::vector<Case> cases = plan_cases(args, backends, cuda);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = args.threads > 0 ? args.threads : cores;
  std::printf(
      "bench-attention: device %s, %s inputs, %lld threads, median of %d timed runs after "
      "warm-up, %zu cases + sgemm, one process each%s\n",
      args.device.c_str(), args.dtype.c_str(), static_cast<long long>(threads), args.repeats, cases.size(),
      args.quick ? " (--quick)" : "");
  if (cuda)
    std::printf(
        "peak_mb: CUDA caching-allocator peak over the case's inputs; cases estimated "
        "above %.0f%% of GPU memory are skipped\n\n",
        100 * kCudaMemoryShare);
  else
    std::printf(
        "peak_mb: resident-memory increase over the case's inputs (VmHWM - VmRSS); cases "
        "estimated above %.0f%% of RAM (%.1f GiB) are skipped\n\n",
        100 * kCpuMemoryShare, memory_total_bytes() * kCpuMemoryShare / kGiB);
  const double load_start = load_average();
  if (load_start > 0.25 * cores)
    std::printf(
        "note: load average %.2f on %u cores before the run: other work competes for the "
        "CPU, so timings will be slower and noisier than on an idle machine\n\n",
        load_start, cores);
  print_table_header();

  std::vector<Row> rows;
  int failed = 0, skipped = 0;
  const auto run_one = [&](const Case& c) {
    const ChildOutcome o = run_child(exe, c, args);
    if (o.kind == ChildOutcome::kOk) {
      Row r{c, o.ms, case_flops(c) / (o.ms * 1e-3) / 1e9, o.peak_mb, o.kernel};
      print_row(r);
      rows.push_back(r);
    } else {
      (o.kind == ChildOutcome::kSkipped ? skipped : failed) += 1;
      std::printf("  %s %s: %s\n", o.kind == ChildOutcome::kSkipped ? "skipped" : "FAILED",
                  case_label(c).c_str(), o.note.c_str());
      std::fflush(stdout);
    }
  };
  // The roofline first: 2·1024³ FLOPs of plain LibTorch sgemm.
  run_one({"sgemm", "fwd", 1, 1, 1024, 1024, 1024, false});
  for (const Case& c : cases) run_one(c);

  print_ratios(rows);
  std::printf("\nload average: %.2f before, %.2f after (%u cores)\n", load_start, load_average(),
              cores);
  if (skipped) std::printf("\n%d case(s) skipped for memory\n", skipped);
  if (!args.csv.empty()) {
    write_csv(args.csv, args.device, args.dtype, rows);
    std::printf("wrote %s (%zu rows)\n", args.csv.c_str(), rows.size());
  }
  if (failed) {
    spdlog::error("bench-attention: {} case(s) failed", failed);
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace

// `nmt bench-attention`: its options, filled into `args` when it is the one given.
CLI::App* add_bench_attention_command(CLI::App& app, BenchArgs& args) {
  auto* cmd = app.add_subcommand("bench-attention",
                                 "time the attention backends against each other and sgemm (one process per case)");
  cmd->add_option("--device", args.device, "device: cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--csv", args.csv, "also write the results to this CSV file");
  cmd->add_option("--dtype", args.dtype, "dtype of q, k, v and dO: float32 | bf16 (sgemm stays float32)")
      ->check(CLI::IsMember({"float32", "bf16"}));
  cmd->add_flag("--quick", args.quick, "reduced set for CI: T = 128, 512 and cross, at most 3 repeats");
  cmd->add_option("--threads", args.threads, "intra-op threads (0 = all cores)")->check(cli::int_range(0, 256));
  cmd->add_option("--backends", args.backends, "comma-separated subset of " + ops::backend_choices())->delimiter(',');
  cmd->add_option("--lens", args.lens,
                  "comma-separated self-attention lengths (B = 8, H = 8) instead of the default "
                  "plan")
      ->delimiter(',')
      ->check(cli::int_range(1, 1 << 20));
  cmd->add_option("--head-dims", args.head_dims, "comma-separated head dims instead of the default plan's")
      ->delimiter(',')
      ->check(cli::int_range(1, 256));
  cmd->add_option("--repeats", args.repeats, "timed runs per case (median reported)")->check(cli::int_range(1, 1000));
  cmd->add_option("--sdpa", args.sdpa,
                  "the torch backend's SDPA kernel on CUDA: auto (LibTorch's choice) or only one of "
                  "flash | efficient | cudnn | math")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kSdpaChoices), std::end(kSdpaChoices))));
  cmd->add_option("--case", args.single_case, "internal: run one case in this process")
      ->group("");  // hidden: used by the per-case child processes
  return cmd;
}

int run_bench_attention(const BenchArgs& args) {
  if (args.device != "cpu" && args.device != "cuda")
    throw InputError("--device: '" + args.device + "' is not one of: cpu | cuda");
  resolve_device(kDeviceChoices.parse(args.device, "--device"), "--device");  // InputError when CUDA is missing
  if (args.repeats < 1) throw InputError("--repeats: must be >= 1");
  // Our CPU kernels compute in float32 or float64: every naive / flash case
  // would fail one by one.
  if (args.dtype == "bf16" && args.device == "cpu")
    for (const std::string& b : args.backends)
      if (b != "torch")
        throw InputError("--dtype bf16: the " + b +
                         " backend has no bf16 CPU kernel (use --device cuda, or --backends torch)");
  if (args.threads < 0) throw InputError("--threads: must be >= 0 (0 = all cores)");
  if (args.sdpa != "auto" && args.device != "cuda")
    throw InputError("--sdpa " + args.sdpa + ": picks among LibTorch's CUDA kernels; needs --device cuda");
#if TORCH_VERSION_MAJOR < 2
  if (args.sdpa != "auto")
    throw InputError("--sdpa " + args.sdpa + ": needs LibTorch 2.x (this is " + TORCH_VERSION + ")");
#endif
  return args.single_case.empty() ? run_parent(args) : run_single_case(args);
}

}  // namespace nmt::bench
