// Token embeddings as the model uses them, fused on CPU
// (cpu/embedding_cpu.h): dropout(table[ids] * scale + positions[offset + t]).
// Composite elsewhere and as the reference.
#pragma once

#include <ATen/core/Tensor.h>

#include "ops/random/dropout.h"

namespace nmt::ops {

// ids: [B, T] int64, table: [V, C], positions: [P, C] (not trained) ->
// [B, T, C]. The padding id's row gets no gradient.
at::Tensor embed_tokens(const at::Tensor& ids, const at::Tensor& table, const at::Tensor& positions,
                        int64_t position_offset, double scale, int64_t padding_id,
                        const Dropout& dropout);
at::Tensor embed_tokens_reference(const at::Tensor& ids, const at::Tensor& table,
                                  const at::Tensor& positions, int64_t position_offset,
                                  double scale, int64_t padding_id, const Dropout& dropout);

}  // namespace nmt::ops
