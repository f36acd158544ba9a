// LibTorch glue for the CUDA dropout multipliers (compiled only against a
// LibTorch with CUDA): the tensor, its device and stream; the kernel
// (dropout_kernel.cu) never sees a tensor.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include "ops/random/cuda/dropout_kernel.h"
#include "ops/random/dropout.h"

namespace nmt::ops {

at::Tensor dropout_multipliers_cuda(const Dropout& d, int64_t batch, int64_t length, int64_t channels,
                                    const at::TensorOptions& options) {
  const c10::cuda::CUDAGuard guard(options.device());
  at::Tensor out = at::empty({batch, length, channels}, options);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int err = options.dtype() == at::kBFloat16
                      ? cuda::dropout_multipliers(d.stream(), batch, length, channels,
                                                  reinterpret_cast<bf16*>(out.data_ptr<at::BFloat16>()), stream)
                      : cuda::dropout_multipliers(d.stream(), batch, length, channels, out.data_ptr<float>(), stream);
  TORCH_CHECK(err == 0, "dropout multipliers (CUDA) failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
  return out;
}

}  // namespace nmt::ops
