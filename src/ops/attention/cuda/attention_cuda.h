// CUDA attention kernels. Compiled by nvcc, no LibTorch headers: each entry
// point takes the plain parameter struct plus the stream to run on.
// float32, plus a bf16 tensor-core flash forward and backward. Returns 0 on success, else
// a cudaError_t value.
#pragma once

#include <string>

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
// The same with one of the forward's tilings (0 .. tilings() - 1), for
// benchmarks and tests that compare them.
int flash_attention_forward_bf16_tilings();
std::string flash_attention_forward_bf16_tiling_name(int head_dim, int tiling);
int flash_attention_forward_bf16_tiling(const AttentionForwardParams<bf16, float>& p, cudaStream_t stream,
                                        int tiling);
// Its backward on tensor cores (flash_attention_bf16_bwd.cu): bf16 q, k, v,
// o, dO and gradients, float32 lse from the forward. Needs a scratch of
// B*H*Tq floats (delta = rowsum(dO * O)). With dq_scratch (B*H*Tq*head_dim
// floats, 8-byte aligned) dQ is added up there with atomics: faster, but its
// last bits vary from run to run. Without it (nullptr) the backward is
// deterministic: no atomics, the same bits on every run. Only for calls
// _supported accepts (the forward's conditions, plus 16-byte aligned dO rows
// and even gradient strides).
bool flash_attention_backward_bf16_supported(const AttentionBackwardParams<bf16, float>& p);
// The atomic dQ pays from this many keys on (H100, B = H = 8: forward +
// backward 1.02 to 1.12 times as fast at 1024 and 4096 keys); with fewer, its
// two extra launches (clearing the scratch, narrowing it to bf16) and the
// contention of every key block on one query tile cost more than the
// recomputed S and dP save (64 queries x 512 keys: 0.83 times as fast).
constexpr int64_t kAtomicDqMinKeys = 1024;
// Whether the bf16 backward gets a dQ scratch (atomics): long key sequences,
// and never when deterministic algorithms are asked for (LibTorch's switch,
// torch.use_deterministic_algorithms).
inline bool bf16_backward_uses_atomic_dq(int64_t k_len, bool deterministic) {
  return k_len >= kAtomicDqMinKeys && !deterministic;
}
int flash_attention_backward_bf16(const AttentionBackwardParams<bf16, float>& p, float* delta_scratch,
                                  float* dq_scratch, cudaStream_t stream);
// The same with one of the dK/dV kernel's tilings (0 .. tilings() - 1; the
// default is the one above runs), for benchmarks and tests that compare them.
int flash_attention_backward_bf16_tilings();
std::string flash_attention_backward_bf16_tiling_name(int head_dim, int tiling);
int flash_attention_backward_bf16_tiling(const AttentionBackwardParams<bf16, float>& p, float* delta_scratch,
                                         float* dq_scratch, cudaStream_t stream, int tiling);

}  // namespace nmt::ops::cuda
