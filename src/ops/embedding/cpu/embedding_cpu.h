// Token embedding, fused: out[b, t] = dropout(table[ids[b, t]] * scale +
// positions[offset + t]). The backward scatters into the table gradient;
// the padding id gets none (as torch::nn::Embedding's padding_idx).
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
#pragma once

#include <cstdint>

#include "ops/cpu_isa.h"
#include "ops/random/philox.h"

namespace nmt::ops::cpu {

template <typename T>
struct EmbeddingParams {
  const int64_t* ids;    // ids: [B, T]
  const T* table;        // table: [V, C]
  const T* positions;    // positions: [P, C], row offset + t is added at position t
  T* out;                // out: [B, T, C] (written)
  int64_t batch, length, channels, vocab;
  int64_t position_offset;
  T scale;
  philox::DropoutStream dropout;
};

template <typename T>
struct EmbeddingBackwardParams {
  const int64_t* ids;  // ids: [B, T]
  const T* dout;       // dout: [B, T, C]
  T* dtable;           // dtable: [V, C] (written: zeros where no token points)
  int64_t batch, length, channels, vocab;
  int64_t padding_id;  // gets no gradient
  T scale;
  philox::DropoutStream dropout;
};

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
