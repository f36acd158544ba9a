// The CUDA side of ops/op_glue.h (compiled only against a LibTorch with CUDA).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include "ops/op_glue.h"

namespace nmt::ops::glue {

void* cuda_stream_for(const at::Tensor& t) {
  const c10::DeviceIndex device = t.device().index();
  // One device per process in practice: switching is the rare case.
  if (c10::cuda::current_device() != device) c10::cuda::set_device(device);
  return at::cuda::getCurrentCUDAStream(device).stream();
}

void check_cuda(int err, const char* what) {
  TORCH_CHECK(err == 0, what, " (CUDA) failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
}

}  // namespace nmt::ops::glue
