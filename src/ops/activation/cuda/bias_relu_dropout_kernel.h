// The feed-forward block's middle on a GPU (bias_relu_dropout_kernel.cu):
// out = dropout(relu(h + bias)) with float32 bias and float32 or bf16 h and
// out, the same arithmetic and masks as the CPU kernels
// (cpu/bias_relu_dropout_cpu.h). Compiled by nvcc, no LibTorch headers.
// Return 0 on success, else a cudaError_t value.
#pragma once

#include <cstdint>

#include "ops/activation/bias_relu_dropout_params.h"
#include "ops/bf16.h"

typedef struct CUstream_st* cudaStream_t;

namespace nmt::ops::cuda {

int bias_relu_dropout_forward(const BiasReluDropoutParams<float, float>& p, cudaStream_t stream);
int bias_relu_dropout_forward(const BiasReluDropoutParams<float, bf16>& p, cudaStream_t stream);

// The backward's scratch: partial bias gradients of its row groups, floats.
int64_t bias_relu_dropout_backward_scratch_floats(int64_t rows, int64_t channels);
int bias_relu_dropout_backward(const BiasReluDropoutBackwardParams<float, float>& p, float* scratch,
                               cudaStream_t stream);
int bias_relu_dropout_backward(const BiasReluDropoutBackwardParams<float, bf16>& p, float* scratch,
                               cudaStream_t stream);

}  // namespace nmt::ops::cuda
