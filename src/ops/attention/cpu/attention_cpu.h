// CPU attention kernels. Pure C++ (OpenMP and a register-blocked micro-kernel
// of their own), no LibTorch and no BLAS. Compiled once per instruction set
// (ops/cpu_isa.h); the functions in nmt::ops::cpu call the best one.
#pragma once

#include "ops/attention/attention_params.h"
#include "ops/cpu_isa.h"

namespace nmt::ops::cpu {

#define NMT_DECLARE_ATTENTION_KERNELS(isa)                                    \
  namespace isa {                                                             \
  template <typename T>                                                       \
  void naive_attention_forward(const AttentionForwardParams<T>& p);          \
  template <typename T>                                                       \
  void naive_attention_backward(const AttentionBackwardParams<T>& p);        \
  template <typename S, typename T>                                           \
  void flash_attention_forward(const AttentionForwardParams<S, T>& p);       \
  template <typename S, typename T>                                           \
  void flash_attention_backward(const AttentionBackwardParams<S, T>& p);     \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_ATTENTION_KERNELS)
#undef NMT_DECLARE_ATTENTION_KERNELS

// Naive: materializes scores/probabilities [B, H, Tq, Tk] with plain
// row-major offset loops. Writes o, probs (required) and lse (if non-null).
template <typename T>
void naive_attention_forward(const AttentionForwardParams<T>& p) {
  NMT_CPU_DISPATCH(naive_attention_forward, p);
}
// Uses the stored probs.
template <typename T>
void naive_attention_backward(const AttentionBackwardParams<T>& p) {
  NMT_CPU_DISPATCH(naive_attention_backward, p);
}

// Flash (FlashAttention-2 tiling, online softmax). Writes o and lse
// (required); never allocates a [Tq, Tk] buffer. Tensors of S = float or
// double computed in themselves, or of S = bf16 computed in T = float
// (widened as read, rounded as written; lse stays float).
template <typename S, typename T>
void flash_attention_forward(const AttentionForwardParams<S, T>& p) {
  NMT_CPU_DISPATCH(flash_attention_forward, p);
}
// Recomputes probabilities from q, k and lse.
template <typename S, typename T>
void flash_attention_backward(const AttentionBackwardParams<S, T>& p) {
  NMT_CPU_DISPATCH(flash_attention_backward, p);
}

}  // namespace nmt::ops::cpu
