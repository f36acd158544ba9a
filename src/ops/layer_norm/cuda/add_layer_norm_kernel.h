// The fused residual add + LayerNorm on a GPU (add_layer_norm_kernel.cu):
// the float32 residual stream with a float32 or bf16 side (y and n), the
// same arithmetic and dropout masks as the CPU kernels
// (cpu/add_layer_norm_cpu.h). Compiled by nvcc, no LibTorch headers.
// Return 0 on success, else a cudaError_t value.
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/layer_norm/add_layer_norm_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace nmt::ops::cuda {

int add_layer_norm_forward(const AddLayerNormForwardParams<float, float>& p, cudaStream_t stream);
int add_layer_norm_forward(const AddLayerNormForwardParams<float, bf16>& p, cudaStream_t stream);

// The backward's scratch: one partial row of gamma and beta gradients per
// warp of its first pass, [warps, 2 C] floats.
int64_t add_layer_norm_backward_scratch_floats(int64_t rows, int64_t channels);
int add_layer_norm_backward(const AddLayerNormBackwardParams<float, float>& p, float* scratch,
                            cudaStream_t stream);
int add_layer_norm_backward(const AddLayerNormBackwardParams<float, bf16>& p, float* scratch,
                            cudaStream_t stream);

}  // namespace nmt::ops::cuda
