// Token embedding, fused: out[b, t] = dropout(table[ids[b, t]] * scale +
// positions[offset + t]). The backward scatters into the table gradient;
// the padding id gets none (as torch::nn::Embedding's padding_idx).
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
#pragma once

#include <cstdint>

#include "ops/cpu_isa.h"
#include "ops/embedding/embedding_params.h"
#include "ops/random/philox.h"

namespace nmt::ops::cpu {

using ops::EmbeddingParams;
using ops::EmbeddingBackwardParams;

#define NMT_DECLARE_EMBEDDING_KERNELS(isa)                              \
  namespace isa {                                                       \
  template <typename T>                                                 \
  void embedding_forward(const EmbeddingParams<T>& p);                 \
  template <typename T>                                                 \
  void embedding_backward(const EmbeddingBackwardParams<T>& p);        \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_EMBEDDING_KERNELS)
#undef NMT_DECLARE_EMBEDDING_KERNELS

template <typename T>
void embedding_forward(const EmbeddingParams<T>& p) {
  NMT_CPU_DISPATCH(embedding_forward, p);
}
template <typename T>
void embedding_backward(const EmbeddingBackwardParams<T>& p) {
  NMT_CPU_DISPATCH(embedding_backward, p);
}

}  // namespace nmt::ops::cpu
