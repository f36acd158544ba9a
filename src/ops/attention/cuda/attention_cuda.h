// CUDA attention kernels. Compiled by nvcc, no LibTorch headers: each entry
// point takes the plain parameter struct plus the stream to run on.
// float32 only. Returns 0 on success, else a cudaError_t value.
#pragma once

#include "ops/attention/attention_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace nmt::ops::cuda {

// Scratch the naive forward needs: none (probs is provided by the caller,
// [B, H, Tq, Tk] float, and is kept for the backward).
int naive_attention_forward(const AttentionForwardParams<float>& p, cudaStream_t stream);
// Needs a caller-provided scratch of B*H*Tq*Tk floats for dS (dscratch).
int naive_attention_backward(const AttentionBackwardParams<float>& p, float* dscratch,
                             cudaStream_t stream);

int flash_attention_forward(const AttentionForwardParams<float>& p, cudaStream_t stream);
// Needs a caller-provided scratch of B*H*Tq floats (D = rowsum(dO*O)) and a
// float32 dq accumulator of B*H*Tq*D floats when dq is accumulated by atomics
// (dq_accum, zero-filled by the kernel itself, then copied into dq). dq_accum
// may be null: dq itself is then zero-filled and accumulated into (no copy).
// Needs o and lse from flash_attention_forward.
int flash_attention_backward(const AttentionBackwardParams<float>& p, float* delta_scratch,
                             float* dq_accum, cudaStream_t stream);

}  // namespace nmt::ops::cuda
