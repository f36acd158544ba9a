#include "cli/build_info.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <sstream>

#include "nmt_build_paths.h"
#include "util/cpu_features.h"
#include "util/thread_env.h"

namespace nmt::cli {

std::string build_info() {
  std::ostringstream s;
  s << "nmt (C++17, " << __VERSION__ << ")\n";
  s << "LibTorch " << TORCH_VERSION << "\n";
  const std::string archs = NMT_CUDA_KERNEL_ARCHS;
#ifdef NMT_WITH_CUDA
  s << "CUDA: on (attention kernels for sm " << archs << ", LibTorch glue, NCCL process group for --nproc); ";
  try {
    const auto gpus = static_cast<int64_t>(torch::cuda::device_count());  // an int8_t in LibTorch 2.x: not a char to print
    s << gpus << " GPU" << (gpus == 1 ? "" : "s") << " visible\n";
  } catch (const std::exception& e) {
    s << "no GPU visible (" << e.what() << ")\n";
  }
#else
  s << "CUDA: off (" << (archs.empty() ? "no CUDA compiler" : "kernels compiled for sm " + archs + ", but LibTorch has no CUDA")
    << "); NCCL: off\n";
#endif
  s << "CPU kernels: up to avx512vnni; this CPU: " << isa_name(best_cpu_isa())
    << (cpu_has_fast_bf16() ? ", fast bf16" : ", no fast bf16") << "\n";
  if (const std::string blas = blas_kernels(); !blas.empty()) s << "BLAS: " << blas << "\n";
  return s.str();
}

}  // namespace nmt::cli
