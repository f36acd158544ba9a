#include "util/device.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "util/cpu_features.h"
#include "util/errors.h"
#include "util/thread_env.h"
#include "util/timing.h"

namespace nmt {

c10::Device resolve_device(DeviceKind kind, const std::string& what) {
  if (kind == DeviceKind::kCpu) return c10::Device(c10::kCPU);
  const bool have_cuda = torch::cuda::is_available();
  if (kind == DeviceKind::kAuto) return have_cuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
  if (!have_cuda)
    throw InputError(what + ": cuda requested, but " +
                     std::string(torch::cuda::device_count() == 0
                                     ? "no CUDA device is available to this LibTorch build"
                                     : "CUDA is not usable"));
#ifndef NMT_WITH_CUDA
  throw InputError(what + ": cuda requested, but nmt was built without its CUDA kernels "
                          "(configure against a CUDA LibTorch with nvcc present)");
#endif
  return c10::Device(c10::kCUDA);
}

c10::ScalarType resolve_precision(Precision p, const c10::Device& device, const std::string& what,
                                  const std::function<double()>& bf16_speedup, const std::string& kept) {
  if (p == Precision::kFloat32) return c10::kFloat;
  if (p == Precision::kAuto) {
    if (kept == "float32") return c10::kFloat;
    if (!device.is_cpu()) return c10::kBFloat16;
    if (!cpu_has_fast_bf16()) return c10::kFloat;
    if (kept == "bf16") return c10::kBFloat16;
    return !bf16_speedup || bf16_speedup() >= kBf16TrainingPays ? c10::kBFloat16 : c10::kFloat;
  }
  if (device.is_cpu() && !cpu_has_fast_bf16()) {
    const CpuFeatures& f = cpu_features();
    if (f.avx512_bf16 || f.amx_bf16)  // the CPU has it; NMT_CPU_ISA lowered the kernels
      throw InputError(what + ": bf16 needs the AVX-512 kernels, and NMT_CPU_ISA=" + isa_name(kernel_isa()) +
                       " picks others; use float32");
    throw InputError(what + ": bf16 needs a CPU with AVX512-BF16 or AMX-BF16 and this one has "
                            "neither; use float32");
  }
  return c10::kBFloat16;
}

const char* precision_name(c10::ScalarType dtype) {
  return kPrecisionChoices.name(dtype == c10::kBFloat16 ? Precision::kBf16 : Precision::kFloat32);
}

double bf16_product_speedup(int64_t rows, int64_t inner, int64_t outer) {
  at::NoGradGuard no_grad;
  const at::Tensor x = at::randn({rows, inner});   // x: [rows, inner], activations
  const at::Tensor w = at::randn({outer, inner});  // w: [outer, inner], float32 master weights
  at::Tensor y;
  const double f32 = median_seconds_per_call([&] { y = at::mm(x, w.t()); });
  const double bf16 = median_seconds_per_call([&] { y = at::mm(x.to(at::kBFloat16), w.to(at::kBFloat16).t()); });
  return f32 / bf16;
}

int64_t set_threads(int64_t threads) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(threads));
  set_blas_threads(static_cast<int>(threads));
  return threads;
}

void release_free_host_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace nmt
