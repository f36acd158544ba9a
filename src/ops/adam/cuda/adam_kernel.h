// Adam over the flat float32 buffers on a GPU (adam_kernel.cu): one launch
// for the whole update instead of a dozen LibTorch ops over the buffers, the
// arithmetic and order of cpu/adam_cpu.h (torch::optim::Adam's). Compiled by
// nvcc, no LibTorch headers. Returns 0 on success, else a cudaError_t value.
#pragma once

#include "ops/adam/adam_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace nmt::ops::cuda {

// p.grad_scale is not read: the factor is *grad_scale, a float on the GPU
// (the clipping factor, computed there: no copy to the host).
int adam_step(const AdamParams<float>& p, const float* grad_scale, cudaStream_t stream);

}  // namespace nmt::ops::cuda
