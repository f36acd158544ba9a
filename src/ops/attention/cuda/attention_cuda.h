// CUDA attention kernels. Compiled by nvcc, no LibTorch headers: each entry
// point takes the plain parameter struct plus the stream to run on.
// float32, plus a bf16 tensor-core flash forward and backward. Returns 0 on success, else
// a cudaError_t value.
#pragma once

#include "ops/attention/attention_params.h"
#include "ops/bf16.h"

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

// bf16 q, k, v, o with float32 lse (flash_attention_bf16.cu): tensor cores,
// float32 accumulation. Only for calls _supported accepts (a GPU of compute
// capability 8.0 or later, head dims 8..128 in multiples of 8, 16-byte
// aligned q, k, v rows; o and lse are not looked at); the rest widen to
// float32. o is written with its strides (even ones, 4-byte aligned).
bool flash_attention_forward_bf16_supported(const AttentionForwardParams<bf16, float>& p);
int flash_attention_forward_bf16(const AttentionForwardParams<bf16, float>& p, cudaStream_t stream);
// Its backward on tensor cores (flash_attention_bf16_bwd.cu): bf16 q, k, v,
// o, dO and gradients, float32 lse from the forward. Needs a scratch of
// B*H*Tq floats (delta = rowsum(dO * O)). Deterministic: no atomics, the
// same bits on every run. Only for calls _supported accepts (the forward's
// conditions, plus 16-byte aligned dO rows and even gradient strides).
bool flash_attention_backward_bf16_supported(const AttentionBackwardParams<bf16, float>& p);
int flash_attention_backward_bf16(const AttentionBackwardParams<bf16, float>& p, float* delta_scratch,
                                  cudaStream_t stream);

}  // namespace nmt::ops::cuda
