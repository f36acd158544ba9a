// Column sums of per-block partial rows on a GPU: the second pass of the
// fused backward kernels whose parameter gradients (LayerNorm's gamma and
// beta, a bias) are sums over every row. Each block of the first pass writes
// its own partial row, and this pass adds them up in a fixed order, so the
// gradients are the same bits on every run (no atomics).
// Compiled by nvcc, no LibTorch headers. Returns 0 or a cudaError_t value.
#pragma once

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace nmt::ops::cuda {

// partial: [parts, cols] floats. Column c's sum goes to out0[c] for c < split,
// else to out1[c - split] (two gradients from one partial row each).
int column_sums(const float* partial, int64_t parts, int64_t cols, int64_t split, float* out0, float* out1,
                cudaStream_t stream);

}  // namespace nmt::ops::cuda
