// Plain-data description of one attention call, shared by every kernel
// (CPU and CUDA). No LibTorch here: kernels see pointers, strides and sizes
// only, so they compile and can be tested without LibTorch.
//
// Layout: q [B, H, Tq, D], k/v [B, H, Tk, D]. The last dimension (D) is
// contiguous; batch, head and time strides are given in elements, so views
// such as x.view({B, T, H, D}).transpose(1, 2) need no copy.
// o, d_o and the gradients dq, dk, dv have their own strides too (the model
// reads and writes them as [B, T, H, D] rows of packed projections); lse and
// probs are contiguous.
//
// Masking semantics (identical in every backend):
//   - causal: query i sees keys j <= i (top-left aligned, also when Tq != Tk);
//   - key_lengths[b]: keys j >= key_lengths[b] are padding and masked;
//   - a query row with no visible key gives o = 0, lse = -inf, and zero
//     gradients (never NaN).
//
// Attention dropout (training only; `dropout.p` = 0 turns it off): the
// probability P[b, h, i, j] is applied times the multiplier (0 or 1/(1-p))
// of the dropout stream at row b·H + h, position j (the key), channel i
// (the query), with dropout.first_row already the global batch row of b = 0
// times H (philox.h says how a (row, position, channel) draws). The softmax
// normalizer and lse are those of P itself; the backward recomputes the
// multipliers from the same coordinates.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/random/philox.h"

namespace nmt::ops {

// T: the element type of q, k, v, o (and probs). Stat: that of lse and scale,
// which stay float32 when the elements are bf16 (the CUDA tensor-core forward).
template <typename T, typename Stat = T>
struct AttentionForwardParams {
  const T* q;  // q: [B, H, Tq, D], strides q_stride_{b,h,t}
  const T* k;  // k: [B, H, Tk, D], strides k_stride_{b,h,t}
  const T* v;  // v: [B, H, Tk, D], strides v_stride_{b,h,t}
  T* o;        // o: [B, H, Tq, D], strides o_stride_{b,h,t} (written)
  Stat* lse;   // lse: [B, H, Tq], contiguous (written; may be null for naive)
  T* probs;    // probs: [B, H, Tq, Tk], contiguous (naive only: written when non-null)
  const int64_t* key_lengths;  // key_lengths: [B], values in [0, Tk]; null = all keys valid

  int64_t q_stride_b, q_stride_h, q_stride_t;
  int64_t k_stride_b, k_stride_h, k_stride_t;
  int64_t v_stride_b, v_stride_h, v_stride_t;
  int64_t o_stride_b, o_stride_h, o_stride_t;

  int64_t batch;     // B
  int64_t heads;     // H
  int64_t q_len;     // Tq
  int64_t k_len;     // Tk
  int64_t head_dim;  // D
  Stat scale;        // usually 1/sqrt(D)
  bool causal;
  philox::DropoutStream dropout;  // p = 0: none (see the header comment)
  // kv_rows: [B] or null (row b reads k and v at batch index b). Set, query
  // row b attends to the keys and values at batch index kv_rows[b]: the
  // hypotheses of one beam sentence read their sentence's encoder keys and
  // values from one place instead of a copy each. Read by the CPU forward
  // kernels (the decoder's fused step sets it); the backward and the CUDA
  // kernels are never given one.
  const int64_t* kv_rows = nullptr;
  // Sentences packed one after another (the encoder's rows without padding;
  // read by the CPU flash kernels only): q_starts[b] is sentence b's first
  // row in q and o (and d_o, dq backward), kv_starts[b] its first row in k
  // and v (dk, dv), both [B + 1], so that sentence b has q_starts[b + 1] -
  // q_starts[b] queries; rows are the time strides apart and the batch
  // strides are not read. Null: row t of batch b at b·stride_b + t·stride_t.
  // With kv_starts a sentence's keys are its rows (key_lengths is not read);
  // q_len and k_len are the longest sentence's (lse stays [B, H, Tq], its
  // rows past a sentence's end unwritten).
  const int64_t* q_starts = nullptr;
  const int64_t* kv_starts = nullptr;
};

// The batch index query row b reads keys and values from.
template <typename T, typename Stat>
inline int64_t kv_row(const AttentionForwardParams<T, Stat>& p, int64_t b) {
  return p.kv_rows != nullptr ? p.kv_rows[b] : b;
}

// Where batch row b of a q-side tensor (q, o, d_o, dq) starts, in elements,
// for its batch and time strides; the same for k-side ones (k, v, dk, dv)
// at batch row kb. Packed sentences (q_starts, kv_starts) start at a row of their own.
template <typename P>
inline int64_t q_offset(const P& p, int64_t b, int64_t stride_b, int64_t stride_t) {
  return p.q_starts != nullptr ? p.q_starts[b] * stride_t : b * stride_b;
}
template <typename P>
inline int64_t kv_offset(const P& p, int64_t kb, int64_t stride_b, int64_t stride_t) {
  return p.kv_starts != nullptr ? p.kv_starts[kb] * stride_t : kb * stride_b;
}
// Keys batch row b may see before the causal mask: its packed sentence's
// rows, else key_lengths[b] (clamped to k_len) or all k_len.
template <typename P>
inline int64_t key_count(const P& p, int64_t b) {
  if (p.kv_starts != nullptr) return p.kv_starts[b + 1] - p.kv_starts[b];
  if (p.key_lengths == nullptr) return p.k_len;
  return std::clamp<int64_t>(p.key_lengths[b], 0, p.k_len);
}
// Query rows of batch row b: its sentence's own with packed rows, else q_len.
template <typename P>
inline int64_t query_rows(const P& p, int64_t b) {
  return p.q_starts != nullptr ? p.q_starts[b + 1] - p.q_starts[b] : p.q_len;
}

// Stat as in the forward: lse and scale stay float32 for bf16 elements.
template <typename T, typename Stat = T>
struct AttentionBackwardParams {
  const T* q;     // q: [B, H, Tq, D], strided as in the forward
  const T* k;     // k: [B, H, Tk, D], strided
  const T* v;     // v: [B, H, Tk, D], strided
  const T* o;     // o: [B, H, Tq, D], strides o_stride_{b,h,t} (flash only)
  const Stat* lse;  // lse: [B, H, Tq], contiguous (flash only)
  const T* probs; // probs: [B, H, Tq, Tk], contiguous (naive only)
  const T* d_o;   // d_o: [B, H, Tq, D], strides do_stride_{b,h,t}
  T* dq;          // dq: [B, H, Tq, D], strides dq_stride_{b,h,t} (written)
  T* dk;          // dk: [B, H, Tk, D], strides dk_stride_{b,h,t} (written)
  T* dv;          // dv: [B, H, Tk, D], strides dv_stride_{b,h,t} (written)
  const int64_t* key_lengths;  // key_lengths: [B] or null

  int64_t q_stride_b, q_stride_h, q_stride_t;
  int64_t k_stride_b, k_stride_h, k_stride_t;
  int64_t v_stride_b, v_stride_h, v_stride_t;
  int64_t o_stride_b, o_stride_h, o_stride_t;
  int64_t do_stride_b, do_stride_h, do_stride_t;
  int64_t dq_stride_b, dq_stride_h, dq_stride_t;
  int64_t dk_stride_b, dk_stride_h, dk_stride_t;
  int64_t dv_stride_b, dv_stride_h, dv_stride_t;

  int64_t batch, heads, q_len, k_len, head_dim;
  Stat scale;
  bool causal;
  philox::DropoutStream dropout;  // as the forward's
  // Packed sentences, as in the forward (CPU flash only).
  const int64_t* q_starts = nullptr;
  const int64_t* kv_starts = nullptr;
};

}  // namespace nmt::ops
