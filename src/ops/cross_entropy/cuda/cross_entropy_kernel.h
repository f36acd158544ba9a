// Label-smoothed cross-entropy of a block of logits rows on a GPU, loss and
// gradient in one launch (cross_entropy_kernel.cu): float32 arithmetic on
// float32 or bf16 logits, the formulas of cpu/cross_entropy_cpu.h. Compiled
// by nvcc, no LibTorch headers. Returns 0 on success, else a cudaError_t value.
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/cross_entropy/cross_entropy_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace nmt::ops::cuda {

int cross_entropy(const CrossEntropyParams<float, float>& p, cudaStream_t stream);
int cross_entropy(const CrossEntropyParams<float, bf16>& p, cudaStream_t stream);

}  // namespace nmt::ops::cuda
