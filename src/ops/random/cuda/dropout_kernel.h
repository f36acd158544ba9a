// The dropout multipliers on a GPU (dropout_kernel.cu): the same Philox
// stream and channel order as the CPU kernels and the ATen reference
// (philox.h), one launch instead of the reference's ~70 integer ops per call.
// Compiled by nvcc, no LibTorch headers. Returns 0 on success, else a
// cudaError_t value.
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/random/philox.h"

typedef struct CUstream_st* cudaStream_t;

namespace nmt::ops::cuda {

// out: [batch, length, channels], contiguous: 0 or 1/(1-p) (p rounded to
// float, the scale rounded to float, then to the element type).
int dropout_multipliers(const philox::DropoutStream& s, int64_t batch, int64_t length, int64_t channels,
                        float* out, cudaStream_t stream);
int dropout_multipliers(const philox::DropoutStream& s, int64_t batch, int64_t length, int64_t channels,
                        bf16* out, cudaStream_t stream);

}  // namespace nmt::ops::cuda
