// The fused token embedding on a GPU (embedding_kernel.cu), float32: the
// same arithmetic and dropout masks as the CPU kernels (cpu/embedding_cpu.h).
// The backward adds into the table gradient with atomics, so its last bits
// can vary from run to run where tokens repeat (the CPU kernel adds tokens
// in order). Compiled by nvcc, no LibTorch headers. Return 0 on success,
// else a cudaError_t value.
#pragma once

#include <cstdint>

#include "ops/embedding/embedding_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace nmt::ops::cuda {

int embedding_forward(const EmbeddingParams<float>& p, cudaStream_t stream);
// p.dtable must be zero-filled by the caller.
int embedding_backward(const EmbeddingBackwardParams<float>& p, cudaStream_t stream);

}  // namespace nmt::ops::cuda
