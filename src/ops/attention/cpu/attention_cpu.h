// CPU attention kernels. Pure C++ (OpenMP and a register-blocked micro-kernel
// of their own), no LibTorch and no BLAS.
#pragma once

#include "ops/attention/attention_params.h"

namespace nmt::ops::cpu {

// Naive: materializes scores/probabilities [B, H, Tq, Tk] with plain
// row-major offset loops. Writes o, probs (required) and lse (if non-null).
template <typename T>
void naive_attention_forward(const AttentionForwardParams<T>& p);
// Uses the stored probs.
template <typename T>
void naive_attention_backward(const AttentionBackwardParams<T>& p);

// Flash (FlashAttention-2 tiling, online softmax). Writes o and lse
// (required); never allocates a [Tq, Tk] buffer.
template <typename T>
void flash_attention_forward(const AttentionForwardParams<T>& p);
// Recomputes probabilities from q, k and lse.
template <typename T>
void flash_attention_backward(const AttentionBackwardParams<T>& p);

}  // namespace nmt::ops::cpu
