#include "util/device.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <thread>

#include "util/errors.h"

namespace nmt {

c10::Device resolve_device(const std::string& name, const std::string& what) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  const bool have_cuda = torch::cuda::is_available();
  if (name == "auto") return have_cuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
  if (name == "cuda") {
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
  throw InputError(what + ": '" + name + "' is not one of: cpu | cuda | auto");
}

int64_t set_threads(int64_t threads) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(threads));
  return threads;
}

}  // namespace nmt
