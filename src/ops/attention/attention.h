// The one attention interface of the model: scaled dot-product attention
// with a backend chosen at run time. Multi-head split/concat and projections
// live in the model; this is only the core softmax(s·QKᵀ + mask)·V.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "ops/attention/backend.h"
#include "ops/random/dropout.h"

namespace nmt::ops {

struct AttentionOptions {
  bool causal = false;          // query i sees keys j <= i (top-left aligned)
  at::Tensor key_lengths;       // key_lengths: [B] int64, keys j >= length masked; undefined = none
  std::optional<double> scale;  // default 1/sqrt(D)
  // Attention dropout on the probabilities (training; p = 0: none). Every
  // backend drops the same elements: attention_params.h says which.
  Dropout dropout;
  // Sentences packed one after another instead of padded (self_attention and
  // cross_attention, CPU flash only): [B + 1] int64 on the CPU, sentence b's
  // rows [starts[b], starts[b + 1]) of the T axis of a [1, T, W] projection;
  // query_starts for the queries (and the output), key_starts for keys and
  // values. Undefined: that side is padded [B, T, W]. Key counts come from
  // key_starts where it is set (key_lengths is then not read).
  at::Tensor query_starts, key_starts;
};

// starts: [B + 1] int64, 0 first, for sentences of `lengths`: [B].
at::Tensor packed_starts(const at::Tensor& lengths);

// The dropout of an attention call with `heads` heads restated on the grid
// its masks are drawn from: row (first_row + b)·heads + h, position = key,
// channel = query (attention_params.h), so that dropout_multipliers(
// per_head_dropout(d, H), B·H, Tk, Tq)[b·H + h, j, i] multiplies P[b, h, i, j].
Dropout per_head_dropout(const Dropout& d, int64_t heads);

// q: [B, H, Tq, D], k: [B, H, Tk, D], v: [B, H, Tk, D] -> [B, H, Tq, D].
// Differentiable with respect to q, k and v in every backend. A query row
// that sees no key yields zeros (and zero gradients).
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const AttentionOptions& options, AttentionBackend backend);

// The model's form: heads packed in the channels of its projections (C = H·D),
// output [B, Tq, C] (heads concatenated). CPU naive/flash read and write the
// packed tensors directly; other cases go through attention() on views.
// With options.query_starts / key_starts, that side's B is 1 and its T the
// rows of every sentence, one after another (CPU flash only).
// qkv: [B, T, 3C], per token q | k | v -> [B, T, C]
at::Tensor self_attention(const at::Tensor& qkv, int64_t heads, const AttentionOptions& options,
                          AttentionBackend backend);
// q: [B, Tq, C], kv: [B, Tk, 2C], per token k | v -> [B, Tq, C]
at::Tensor cross_attention(const at::Tensor& q, const at::Tensor& kv, int64_t heads,
                           const AttentionOptions& options, AttentionBackend backend);

// The probabilities P: [B, H, Tq, Tk] the backend would apply, for display
// (attention maps) and tests. Not differentiable.
at::Tensor attention_probs(const at::Tensor& q, const at::Tensor& k,
                           const AttentionOptions& options);

// Per-backend entry points (attention() dispatches to these).
at::Tensor attention_torch(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const AttentionOptions& options);
at::Tensor attention_naive_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& options);
at::Tensor attention_flash_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& options);
// kv_src undefined: self-attention on q_src = qkv.
at::Tensor packed_attention_cpu(const at::Tensor& q_src, const at::Tensor& kv_src, int64_t heads,
                                const AttentionOptions& options, AttentionBackend backend);
#ifdef NMT_WITH_CUDA
at::Tensor attention_naive_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const AttentionOptions& options);
at::Tensor attention_flash_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const AttentionOptions& options);
// The packed form on a GPU for bf16 projections (flash's tensor-core kernels
// read and write the heads where they lie in the projections' channels):
// kv_src undefined for self-attention on q_src = qkv. Undefined when the
// kernels do not take these tensors (the caller then splits the heads).
at::Tensor packed_flash_attention_cuda(const at::Tensor& q_src, const at::Tensor& kv_src, int64_t heads,
                                       const AttentionOptions& options);
#endif

// Boolean mask [B, 1|H, Tq, Tk] (true = may attend) for the options; used by
// the torch backend and attention_probs.
at::Tensor visibility_mask(int64_t batch, int64_t q_len, int64_t k_len,
                           const AttentionOptions& options, const at::TensorOptions& device);

}  // namespace nmt::ops
