// FlashAttention-2 on the CPU: tiled attention with an online softmax, so no
// [Tq, Tk] buffer ever exists. The tile products run on our own
// register-blocked micro-kernel (micro_kernel below) rather than on BLAS:
// at tile size (64 x 64 x D) OpenBLAS pays call and packing overhead per
// tile (about half the per-core throughput of this kernel on the reference
// machine), the softmax steps could not be fused into its epilogue, and the
// pthread OpenBLAS build could start its own threads under our OpenMP ones.
//
// Layout trick: every tile keeps one index as the SIMD lane dimension.
//   forward : lanes = query rows. Q_i is packed transposed once per task and
//             K_j / V_j rows are read in place by scalar broadcast, so the
//             row-wise max/sum of the online softmax are plain vertical
//             vector ops (no horizontal reductions) and K, V need no copy.
//   backward: lanes = keys. K_j / V_j are packed once per task (the task
//             owns one key block), Q_i / dO_i rows are read in place.
//   forward with a few query rows (a decoding step): lanes = the head
//             dimension, one task per query row (forward_query_row).
// Scores are computed in base 2 (scale * log2(e) folded into the packed
// operand), so each probability costs one exp2 polynomial and no multiply.
//
// Storage and compute types: S is the element type of the tensors the
// kernels read and write (q, k, v, o, dO, dQ, dK, dV), T the one they
// compute in. float and double compute in themselves; bf16 tensors (a bf16
// model's projections) are widened as they are read (exactly) and the
// results rounded as they are written, with every product, softmax and
// accumulator in float: the same numbers as widening the tensors first and
// rounding the outputs after, without those two passes over memory.
//
// Instantiated by flash_cpu.cpp (float, bf16) and flash_cpu_f64.cpp (the
// float64 reference), each once per instruction set.
#pragma once

#include "ops/attention/cpu/attention_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/bf16.h"
#include "ops/cpu_parallel.h"
#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {
namespace {

using detail::AlignedBuffer;
using detail::kAccRegs;
using detail::kLanes;
using detail::round_up;
using detail::Vec;
using detail::vec_exp2;
using detail::vec_load;
using detail::vec_loadu;
using detail::vec_max;
using detail::vec_set1;
using detail::vec_store;
using detail::vec_storeu;

// Forward: a task is (b, h, query block of kBlockQ rows); it walks the key
// blocks of kBlockK keys. kBlockQ must be a multiple of the vector lanes.
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 64;
// Backward: a task is (b, h, key block of kBwdBlockK keys, the lane
// dimension); it walks query blocks of kBwdBlockQ rows.
constexpr int64_t kBwdBlockK = 64;
constexpr int64_t kBwdBlockQ = 64;

// Attention dropout draws a query block's multipliers for one key as one run
// of channels, and runs start at multiples of 64 (philox::mask_row).
static_assert(kBlockQ % 64 == 0 && kBwdBlockQ % 64 == 0 && kBwdBlockK % 64 == 0);

constexpr double kLog2e = 1.4426950408889634074;
constexpr double kLn2 = 0.69314718055994530942;

static_assert(kBlockQ % kLanes<double> == 0 && kBlockQ % kLanes<float> == 0);
static_assert(kBwdBlockK % kLanes<double> == 0 && kBwdBlockK % kLanes<float> == 0);

// Rows per register strip for NR accumulator vectors per row: fill the
// accumulator registers, but keep at least two rows so loads are shared.
template <int NR>
constexpr int kStripRows = std::clamp(kAccRegs / NR, 2, 8);

// A block whose lane dimension (query rows forward, keys backward) holds
// only `count` of its `block` lanes: sentences of a few dozen tokens are the
// common case. Calls f(std::integral_constant<int, NR>) with the vectors the
// tile products run over: a quarter, a half or all of block / L.
template <typename T, int64_t block, typename F>
void with_lane_vectors(int64_t count, F&& f) {
  constexpr int kFull = static_cast<int>(block / kLanes<T>);
  if constexpr (kFull % 4 == 0) {
    if (count <= block / 4) return f(std::integral_constant<int, kFull / 4>{});
  }
  if constexpr (kFull % 2 == 0) {
    if (count <= block / 2) return f(std::integral_constant<int, kFull / 2>{});
  }
  f(std::integral_constant<int, kFull>{});
}

// Lane indices 0, 1, ..., L-1 as integers of the element width, for masks.
template <typename T>
typename detail::Simd<T>::Mask lane_iota() {
  typename detail::Simd<T>::Mask iota{};
  for (int t = 0; t < kLanes<T>; ++t) iota[t] = t;
  return iota;
}

// The register-blocked product everything runs on. For an MR x NR strip:
//   acc[i][v] = init(i, v) + sum_{k < depth} x[i * x_si + k * x_sk] * w[k * ldw + v * L + lane]
//   epilogue(i, v, acc[i][v])
// x is read one scalar at a time (broadcast), so it may be a strided user
// tensor in either orientation; w is a packed, vector-aligned tile. The
// accumulators stay in registers for the whole depth loop, and the
// epilogue is where softmax, masking and dS are fused in.
//   x: [MR, depth] with element (i, k) at x[i * x_si + k * x_sk], of type
//      T or a storage type widened to T as it is read (bf16)
//   w: [depth, NR * L], row stride ldw: a packed tile, or rows of a tensor
//      read in place (any alignment; bf16 widened as read)
template <typename T, int MR, int NR, typename X, typename W, typename Init, typename Epilogue>
inline __attribute__((always_inline)) void micro_kernel(
    int64_t depth, const X* x, int64_t x_si, int64_t x_sk, const W* w, int64_t ldw,
    const Init& init, const Epilogue& epilogue) {
  constexpr int L = kLanes<T>;
  Vec<T> acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
    for (int v = 0; v < NR; ++v) acc[i][v] = init(i, v);
  }
  for (int64_t k = 0; k < depth; ++k) {
    const W* w_k = w + k * ldw;
    const X* x_k = x + k * x_sk;
    Vec<T> w_vec[NR];
#pragma GCC unroll 16
    for (int v = 0; v < NR; ++v) w_vec[v] = vec_loadu(w_k + v * L);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const T x_ik = load_as<T>(x_k[i * x_si]);
#pragma GCC unroll 16
      for (int v = 0; v < NR; ++v) acc[i][v] += x_ik * w_vec[v];
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
    for (int v = 0; v < NR; ++v) epilogue(i, v, acc[i][v]);
  }
}

// Dispatches a leftover strip of `rows` < kStripRows rows to the matching
// instantiation, so row counts need not be multiples of the strip.
//   x: [rows, depth] starting at row row0, w: [depth, NR * L] (as in tile_gemm)
template <typename T, int NR, int MR, typename X, typename W, typename Init, typename Epilogue>
inline void remainder_strip(int64_t rows, int64_t row0, int64_t depth, const X* x, int64_t x_si,
                            int64_t x_sk, const W* w, int64_t ldw, const Init& init,
                            const Epilogue& epilogue) {
  if constexpr (MR >= 1) {
    if (rows == MR) {
      micro_kernel<T, MR, NR>(
          depth, x + row0 * x_si, x_si, x_sk, w, ldw,
          [&](int i, int v) { return init(row0 + i, v); },
          [&](int i, int v, Vec<T> a) { epilogue(row0 + i, v, a); });
    } else {
      remainder_strip<T, NR, MR - 1>(rows, row0, depth, x, x_si, x_sk, w, ldw, init, epilogue);
    }
  }
}

// out rows [0, rows) x NR vectors = x-strips times packed w; init/epilogue
// get the absolute row index.
//   x: [rows, depth] read as x[row * x_si + k * x_sk]
//   w: [depth, NR * L], row stride ldw (packed, or tensor rows in place)
template <typename T, int NR, typename X, typename W, typename Init, typename Epilogue>
void tile_gemm(int64_t rows, int64_t depth, const X* x, int64_t x_si, int64_t x_sk, const W* w,
               int64_t ldw, const Init& init, const Epilogue& epilogue) {
  constexpr int kMr = kStripRows<NR>;
  int64_t row0 = 0;
  for (; row0 + kMr <= rows; row0 += kMr) {
    micro_kernel<T, kMr, NR>(
        depth, x + row0 * x_si, x_si, x_sk, w, ldw,
        [&](int i, int v) { return init(row0 + i, v); },
        [&](int i, int v, Vec<T> a) { epilogue(row0 + i, v, a); });
  }
  if (row0 < rows) {
    remainder_strip<T, NR, kMr - 1>(rows - row0, row0, depth, x, x_si, x_sk, w, ldw, init,
                                    epilogue);
  }
}

// Vectors of the head dimension a product keeps in registers per strip.
constexpr int kChunkVecs = 4;

// f(std::integral_constant<int, NV>{}, v0) for the vectors [v0, v0 + NV) of
// `vecs`, NV = kChunkVecs until fewer are left: the head dimension split into
// strips whose accumulators fit the registers.
template <typename F>
void for_vector_chunks(int64_t vecs, F&& f) {
  int64_t v0 = 0;
  for (; v0 + kChunkVecs <= vecs; v0 += kChunkVecs) f(std::integral_constant<int, kChunkVecs>{}, v0);
  switch (vecs - v0) {
    case 3: f(std::integral_constant<int, 3>{}, v0); break;
    case 2: f(std::integral_constant<int, 2>{}, v0); break;
    case 1: f(std::integral_constant<int, 1>{}, v0); break;
    default: break;
  }
  static_assert(kChunkVecs == 4, "the switch above covers 1 .. kChunkVecs - 1 vectors");
}

// Rows of a head usually come from a strided view ([B, T, H, D] viewed as
// [B, H, T, D]), so consecutive rows sit H * D elements apart and each lands
// on its own page. Once a head spans more pages than the TLB covers, every
// tile pays page walks and the kernels slow down by up to ~2x (T = 16k,
// H = 8, 4 KiB pages). Past this span we copy the tensor into contiguous
// rows once, which costs O(B * H * T * D) memory and one streaming pass.
constexpr int64_t kPackSpanBytes = int64_t{8} << 20;

template <typename T>
bool worth_packing(int64_t stride_t, int64_t len, int64_t head_dim) {
  return stride_t != head_dim &&
         len * stride_t * static_cast<int64_t>(sizeof(T)) > kPackSpanBytes;
}

// Copies a strided tensor into contiguous rows.
//   src: [B, H, len, D] with strides (sb, sh, st); dst: [B, H, len, D] contiguous
template <typename T>
void copy_contiguous(const T* src, int64_t sb, int64_t sh, int64_t st, int64_t batch,
                     int64_t heads, int64_t len, int64_t head_dim, T* dst) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const T* src_bh = src + b * sb + h * sh;
      T* dst_bh = dst + (b * heads + h) * len * head_dim;
      for (int64_t t = 0; t < len; ++t) {
        std::copy(src_bh + t * st, src_bh + t * st + head_dim, dst_bh + t * head_dim);
      }
    }
  }
}

// Zeros into n elements of a tensor row (of any storage type).
template <typename S>
void store_zeros(S* row, int64_t n) {
  using Compute = std::conditional_t<std::is_same_v<S, bf16>, float, S>;
  for (int64_t i = 0; i < n; ++i) store_as(row + i, Compute(0));
}

// The tiles keep one index on the lanes (keys or query rows) while the
// tensors hold rows of D channels; these two move a block between the
// layouts L x L at a time through registers (detail::vec_transpose), the
// channels past the last whole block one at a time. Element by element
// throughout, the transposes were about a third of the kernels' time on
// ten-token sentences.
//
// Rows to lanes: dst[d * ld + c] = src[c * stride + d] * scale for c < count,
// and 0 for count <= c < lanes (lanes a multiple of L, dst 64-byte aligned,
// ld a multiple of L).
//   src: [count, D] rows `stride` apart; dst: [D, ld]
template <typename S, typename T>
void rows_to_lanes(const S* src, int64_t stride, int64_t count, int64_t lanes, int64_t D, T scale, T* dst,
                   int64_t ld) {
  using V = Vec<T>;
  constexpr int L = kLanes<T>;
  const V scale_v = vec_set1(scale);
  int64_t d0 = 0;
  for (; d0 + L <= D; d0 += L) {
    for (int64_t c0 = 0; c0 < lanes; c0 += L) {
      V t[L];
#pragma GCC unroll 16
      for (int i = 0; i < L; ++i) t[i] = c0 + i < count ? vec_loadu(src + (c0 + i) * stride + d0) : V{};
      detail::vec_transpose<T>(t);
#pragma GCC unroll 16
      for (int i = 0; i < L; ++i) vec_store(dst + (d0 + i) * ld + c0, t[i] * scale_v);
    }
  }
  for (int64_t d = d0; d < D; ++d) {
    for (int64_t c = 0; c < count; ++c) dst[d * ld + c] = load_as<T>(src[c * stride + d]) * scale;
    std::fill(dst + d * ld + count, dst + d * ld + lanes, T(0));
  }
}

// Lanes to rows: dst[c * stride + d] = src[d * ld + c] * row_scale(c) for
// c < count (src 64-byte aligned, ld a multiple of L).
//   src: [D, ld]; dst: [count, D] rows `stride` apart
template <typename S, typename T, typename RowScale>
void lanes_to_rows(const T* src, int64_t ld, int64_t count, int64_t D, S* dst, int64_t stride,
                   const RowScale& row_scale) {
  using V = Vec<T>;
  constexpr int L = kLanes<T>;
  int64_t d0 = 0;
  for (; d0 + L <= D; d0 += L) {
    for (int64_t c0 = 0; c0 < count; c0 += L) {
      V t[L];
#pragma GCC unroll 16
      for (int i = 0; i < L; ++i) t[i] = vec_load(src + (d0 + i) * ld + c0);
      detail::vec_transpose<T>(t);
      const int64_t rows = std::min<int64_t>(L, count - c0);
      for (int64_t i = 0; i < rows; ++i) vec_storeu(dst + (c0 + i) * stride + d0, t[i] * vec_set1(row_scale(c0 + i)));
    }
  }
  for (int64_t c = 0; c < count && d0 < D; ++c) {
    const T f = row_scale(c);
    for (int64_t d = d0; d < D; ++d) store_as(dst + c * stride + d, src[d * ld + c] * f);
  }
}

// dst[d] = src[d] * scale for d < D, whole vectors then the tail: a row
// between a tensor (float, double or bf16 storage) and a compute-type tile.
//   src: [D], dst: [D] (either may be unaligned)
template <typename S, typename T, typename U>
inline void scaled_row(const S* src, int64_t D, U scale, T* dst) {
  constexpr int L = kLanes<U>;
  const Vec<U> scale_v = vec_set1(scale);
  int64_t d = 0;
  for (; d + L <= D; d += L) vec_storeu(dst + d, vec_loadu(src + d) * scale_v);
  for (; d < D; ++d) store_as(dst + d, load_as<U>(src[d]) * scale);
}

// out[i, :] = row_scale(i) * sum_{c < depth} x[i * x_si + c * x_sk] * w[c, :]
// for rows [0, rows), with the head dimension on the lanes: w's rows are a
// tensor's (D channels, rows w_stride apart, read in place) and out's rows
// are written directly, kChunkVecs vectors of D at a time (D a multiple of L).
// A tile product of the transposed layout, acc[d][lane i] += w[c][d] * x[i][c],
// makes the same FMAs in the same order of c.
//   x: [rows, depth] read as x[i * x_si + c * x_sk] (a tile of T)
//   w: [depth, D] rows w_stride apart; out: [rows, D] rows out_stride apart
template <typename T, typename S, typename RowScale>
void rows_times_rows(int64_t rows, int64_t depth, const T* x, int64_t x_si, int64_t x_sk, const S* w,
                     int64_t w_stride, int64_t D, const RowScale& row_scale, S* out, int64_t out_stride) {
  using V = Vec<T>;
  constexpr int L = kLanes<T>;
  for_vector_chunks(D / L, [&](auto nv, int64_t v0) {
    const int64_t d0 = v0 * L;
    tile_gemm<T, decltype(nv)::value>(
        rows, depth, x, x_si, x_sk, w + d0, w_stride, [](int64_t, int) { return V{}; },
        [&](int64_t i, int vi, V a) { vec_storeu(out + i * out_stride + d0 + vi * L, a * vec_set1(row_scale(i))); });
  });
}

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------

template <typename T>
struct ForwardScratch {
  explicit ForwardScratch(int64_t head_dim)
      : qt(head_dim * kBlockQ), st(kBlockK * kBlockQ), ot(head_dim * kBlockQ), mk(kBlockQ) {}
  AlignedBuffer<T> qt;  // qt: [D, kBlockQ], queries * scale * log2(e), transposed
  AlignedBuffer<T> st;  // st: [kBlockK, kBlockQ], base-2 scores, then probabilities, transposed
  AlignedBuffer<T> ot;  // ot: [D, kBlockQ], unnormalized output, transposed
  AlignedBuffer<T> mk;  // mk: [kBlockQ], one key's dropout multipliers for the block's queries
};

// One query block: rows [i0, i0 + kBlockQ) of head (b, h). NR: query
// vectors the tile products run over, enough for the block's rows (lanes
// from NR * L to kBlockQ are neither computed nor read).
template <typename S, typename T, int NR>
void forward_query_block_nr(const AttentionForwardParams<S, T>& p, int64_t b, int64_t h, int64_t i0,
                            ForwardScratch<T>& scratch) {
  using V = Vec<T>;
  constexpr int L = kLanes<T>;
  static_assert(NR * L <= kBlockQ);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t D = p.head_dim;
  const int64_t rows = std::min(kBlockQ, query_rows(p, b) - i0);

  const S* q = p.q + q_offset(p, b, p.q_stride_b, p.q_stride_t) + h * p.q_stride_h + i0 * p.q_stride_t;  // q: [rows, D]
  const int64_t kb = kv_row(p, b);
  const S* k = p.k + kv_offset(p, kb, p.k_stride_b, p.k_stride_t) + h * p.k_stride_h;  // k: [Tk, D], row stride k_stride_t
  const S* v = p.v + kv_offset(p, kb, p.v_stride_b, p.v_stride_t) + h * p.v_stride_h;  // v: [Tk, D], row stride v_stride_t
  S* o = p.o + q_offset(p, b, p.o_stride_b, p.o_stride_t) + h * p.o_stride_h + i0 * p.o_stride_t;  // o: [rows, D]
  T* lse = p.lse + (b * p.heads + h) * p.q_len + i0;  // lse: [rows]
  T* qt = scratch.qt.data();
  T* st = scratch.st.data();
  T* ot = scratch.ot.data();

  // Keys at or past key_end are invisible to every row of this block.
  int64_t key_end = key_count(p, b);
  if (p.causal) key_end = std::min(key_end, i0 + rows);
  if (key_end == 0) {
    for (int64_t r = 0; r < rows; ++r) store_zeros(o + r * p.o_stride_t, D);
    std::fill(lse, lse + rows, neg_inf);
    return;
  }

  // Pack Q_i transposed (lanes = query rows); padding rows are zero so they
  // produce harmless finite scores. Only the NR * L lanes the products read
  // are cleared: for a ten-token sentence, clearing all kBlockQ of them
  // wrote five times the queries' own size.
  const T q_scale = p.scale * static_cast<T>(kLog2e);
  rows_to_lanes(q, p.q_stride_t, rows, NR * L, D, q_scale, qt, kBlockQ);

  // One key block and rows of whole vectors: pass 3 writes O's rows itself.
  const bool rows_out = key_end <= kBlockK && D % L == 0;

  const auto iota = lane_iota<T>();
  V m[NR], l[NR];  // running row max (base 2) and row sum, one lane per query row
  for (int vi = 0; vi < NR; ++vi) {
    m[vi] = vec_set1(neg_inf);
    l[vi] = vec_set1(T(0));
  }

  for (int64_t j0 = 0; j0 < key_end; j0 += kBlockK) {
    const int64_t n = std::min(kBlockK, key_end - j0);
    // Only a block crossing the diagonal needs an element-wise mask;
    // length masking is already done by stopping at key_end.
    const bool straddles = p.causal && j0 + n - 1 > i0;

    // pass 1: S^T = K_j Q_i^T (base 2), causal mask, block max per row
    V block_max[NR];
    for (int vi = 0; vi < NR; ++vi) block_max[vi] = vec_set1(neg_inf);
    tile_gemm<T, NR>(
        n, D, k + j0 * p.k_stride_t, p.k_stride_t, 1, qt, kBlockQ,
        [](int64_t, int) { return V{}; },
        [&](int64_t c, int vi, V s) {
          if (straddles) {
            // Query row i0 + r sees key j0 + c iff r >= j0 + c - i0.
            const int64_t first_row = std::clamp<int64_t>(j0 + c - i0, 0, kBlockQ);
            s = (iota + vi * L) < static_cast<int>(first_row) ? vec_set1(neg_inf) : s;
          }
          vec_store(st + c * kBlockQ + vi * L, s);
          block_max[vi] = vec_max(block_max[vi], s);
        });

    // pass 2: online softmax. alpha rescales what was accumulated under the
    // old max. A row that has seen no visible key keeps m = -inf; using 0 as
    // its reference avoids exp2(-inf - -inf) = NaN (it gives exactly 0).
    V alpha[NR], m_ref[NR], row_sum[NR];
    for (int vi = 0; vi < NR; ++vi) {
      const V m_new = vec_max(m[vi], block_max[vi]);
      m_ref[vi] = m_new == neg_inf ? V{} : m_new;
      alpha[vi] = vec_exp2(m[vi] - m_ref[vi]);
      m[vi] = m_new;
      row_sum[vi] = V{};
    }
    for (int64_t c = 0; c < n; ++c) {
      T* st_c = st + c * kBlockQ;
#pragma GCC unroll 16
      for (int vi = 0; vi < NR; ++vi) {
        const V e = vec_exp2(vec_load(st_c + vi * L) - m_ref[vi]);
        vec_store(st_c + vi * L, e);
        row_sum[vi] += e;
      }
    }
    for (int vi = 0; vi < NR; ++vi) l[vi] = alpha[vi] * l[vi] + row_sum[vi];

    // pass 2b, attention dropout: V_j is weighted by P * M while the
    // normalizer l above stays P's own sum. Key c's multipliers for the
    // block's query rows are one run of channels (attention_params.h).
    if (p.dropout.p > 0) {
      T* mk = scratch.mk.data();
      for (int64_t c = 0; c < n; ++c) {
        philox::mask_row<T>(p.dropout, b * p.heads + h, j0 + c, rows, mk, i0);
        T* st_c = st + c * kBlockQ;
        for (int64_t r = 0; r < rows; ++r) st_c[r] *= mk[r];
      }
    }

    // All keys in this one block (every sentence of up to kBlockK tokens):
    // pass 4 comes first and pass 3 writes O's rows itself (below).
    if (rows_out) break;

    // pass 3: O^T = diag(alpha) O^T + V_j^T P^T. The first block overwrites
    // ot, so it never needs clearing.
    const bool first = j0 == 0;
    tile_gemm<T, NR>(
        D, n, v + j0 * p.v_stride_t, 1, p.v_stride_t, st, kBlockQ,
        [&](int64_t d, int vi) {
          return first ? V{} : vec_load(ot + d * kBlockQ + vi * L) * alpha[vi];
        },
        [&](int64_t d, int vi, V a) { vec_store(ot + d * kBlockQ + vi * L, a); });
  }

  // pass 4: normalize, transpose back, and save lse = ln(sum exp) for backward
  T inv_l[kBlockQ];
  for (int64_t r = 0; r < rows; ++r) {
    const T l_r = l[r / L][r % L];
    const T m_r = m[r / L][r % L];
    inv_l[r] = l_r > T(0) ? T(1) / l_r : T(0);
    lse[r] = l_r > T(0) ? (m_r + std::log2(l_r)) * static_cast<T>(kLn2) : neg_inf;
  }
  if (rows_out) {
    // pass 3, one key block, head dimension on the lanes: O_i = P V_j / l,
    // V_j's rows read in place and O's rows written directly. The same
    // FMAs in the same order of keys as the transposed pass 3 (their two
    // factors trade places), then the same scaling, so the same bits; a
    // short sentence skips the lanes past its last query and the
    // transpose back.
    rows_times_rows(rows, key_end, st, 1, kBlockQ, v, p.v_stride_t, D,
                    [&](int64_t r) { return inv_l[r]; }, o, p.o_stride_t);
    return;
  }
  lanes_to_rows(ot, kBlockQ, rows, D, o, p.o_stride_t, [&](int64_t r) { return inv_l[r]; });
}

template <typename S, typename T>
void forward_query_block(const AttentionForwardParams<S, T>& p, int64_t b, int64_t h, int64_t i0,
                         ForwardScratch<T>& scratch) {
  // Packed sentences: blocks past this sentence's queries hold no rows.
  const int64_t rows = std::min(kBlockQ, query_rows(p, b) - i0);
  if (rows <= 0) return;
  with_lane_vectors<T, kBlockQ>(rows, [&](auto nr) {
    forward_query_block_nr<S, T, decltype(nr)::value>(p, b, h, i0, scratch);
  });
}

// ---------------------------------------------------------------------------
// Forward, a few query rows (decoding: one new token per row and step)
// ---------------------------------------------------------------------------
//
// The block kernel above puts query rows on the lanes and pays for kBlockQ of
// them whatever Tq is, so one decoding query would fill 1 of 64 lanes. Here a
// task is one query row, the lanes run along the head dimension, and K and V
// are read in place, once per row.

// Query counts up to this take the row kernel.
constexpr int64_t kRowKernelMaxQ = 4;

// acc[0 .. NV*L) = sum_{j < n} p[j] * v[j][d0 + ...], then stored to out.
//   p: [n] probabilities, v: [n, D] rows v_stride apart, out: [NV * L]
template <typename T, int NV, typename S>
void weighted_rows(int64_t n, const T* p, const S* v, int64_t v_stride, T* out) {
  constexpr int L = kLanes<T>;
  Vec<T> acc[NV] = {};
  for (int64_t j = 0; j < n; ++j) {
    const Vec<T> pj = vec_set1(p[j]);
    const S* v_j = v + j * v_stride;
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) acc[u] += pj * vec_loadu(v_j + u * L);
  }
  for (int u = 0; u < NV; ++u) vec_storeu(out + u * L, acc[u]);
}

template <typename T>
struct RowScratch {
  RowScratch(int64_t k_len, int64_t head_dim) : s(round_up(k_len, kLanes<T>)), o(head_dim) {}
  AlignedBuffer<T> s;  // s: [Tk rounded up to lanes], base-2 scores, then probabilities
  AlignedBuffer<T> o;  // o: [D], the unnormalized output row
};

template <typename S, typename T>
void forward_query_row(const AttentionForwardParams<S, T>& p, int64_t b, int64_t h, int64_t i,
                       RowScratch<T>& scratch) {
  using V = Vec<T>;
  constexpr int L = kLanes<T>;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t D = p.head_dim, Dv = D / L * L;
  const S* q = p.q + q_offset(p, b, p.q_stride_b, p.q_stride_t) + h * p.q_stride_h + i * p.q_stride_t;  // q: [D]
  const int64_t kb = kv_row(p, b);
  const S* k = p.k + kv_offset(p, kb, p.k_stride_b, p.k_stride_t) + h * p.k_stride_h;  // k: [Tk, D], row stride k_stride_t
  const S* v = p.v + kv_offset(p, kb, p.v_stride_b, p.v_stride_t) + h * p.v_stride_h;  // v: [Tk, D], row stride v_stride_t
  S* o = p.o + q_offset(p, b, p.o_stride_b, p.o_stride_t) + h * p.o_stride_h + i * p.o_stride_t;  // o: [D]
  T* lse = p.lse + (b * p.heads + h) * p.q_len + i;
  T* s = scratch.s.data();
  T* ob = scratch.o.data();  // ob: [D]

  int64_t key_end = key_count(p, b);
  if (p.causal) key_end = std::min(key_end, i + 1);
  if (key_end == 0) {  // sees no key: attends to nothing
    store_zeros(o, D);
    *lse = neg_inf;
    return;
  }

  // pass 1: s_j = q . k_j * scale * log2(e), two accumulators per key so the
  // FMA chain is not one long dependency.
  const T q_scale = p.scale * static_cast<T>(kLog2e);
  T m = neg_inf;
  for (int64_t j = 0; j < key_end; ++j) {
    const S* k_j = k + j * p.k_stride_t;
    V acc0{}, acc1{};
    int64_t d = 0;
    for (; d + 2 * L <= Dv; d += 2 * L) {
      acc0 += vec_loadu(q + d) * vec_loadu(k_j + d);
      acc1 += vec_loadu(q + d + L) * vec_loadu(k_j + d + L);
    }
    if (d < Dv) acc0 += vec_loadu(q + d) * vec_loadu(k_j + d), d += L;
    T dot = detail::vec_sum_tree(acc0 + acc1);
    for (; d < D; ++d) dot += load_as<T>(q[d]) * load_as<T>(k_j[d]);
    s[j] = dot * q_scale;
    m = std::max(m, s[j]);
  }
  // pass 2: p_j = 2^(s_j - m) and their sum; the padding up to a whole
  // vector holds -inf, which exp2 turns into 0.
  const int64_t padded = round_up(key_end, L);
  std::fill(s + key_end, s + padded, neg_inf);
  V sum{};
  for (int64_t j = 0; j < padded; j += L) {
    const V e = vec_exp2(vec_load(s + j) - m);
    vec_store(s + j, e);
    sum += e;
  }
  const T l = detail::vec_sum(sum);  // >= 1: the max contributes 2^0

  // pass 3: o = sum_j p_j v_j / l, kChunkVecs vectors of D at a time, then
  // the last D % L channels.
  for_vector_chunks(Dv / L, [&](auto nv, int64_t v0) {
    weighted_rows<T, decltype(nv)::value>(key_end, s, v + v0 * L, p.v_stride_t, ob + v0 * L);
  });
  for (int64_t d = Dv; d < D; ++d) {
    T acc = 0;
    for (int64_t j = 0; j < key_end; ++j) acc += s[j] * load_as<T>(v[j * p.v_stride_t + d]);
    ob[d] = acc;
  }
  scaled_row(ob, D, T(1) / l, o);
  *lse = (m + std::log2(l)) * static_cast<T>(kLn2);
}

// ---------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------

template <typename T>
struct BackwardScratch {
  BackwardScratch(int64_t head_dim, int64_t padded_dim, int64_t q_len)
      : kt(head_dim * kBwdBlockK),
        vt(head_dim * kBwdBlockK),
        kp(kBwdBlockK * padded_dim),
        dkt(head_dim * kBwdBlockK),
        dvt(head_dim * kBwdBlockK),
        prob(kBwdBlockQ * kBwdBlockK),
        ds(kBwdBlockQ * kBwdBlockK),
        mask(kBwdBlockQ * kBwdBlockK),
        mrow(kBwdBlockQ),
        dq_acc(q_len * padded_dim) {}
  AlignedBuffer<T> kt;      // kt: [D, Bk], keys * scale * log2(e), transposed
  AlignedBuffer<T> vt;      // vt: [D, Bk], values transposed
  AlignedBuffer<T> kp;      // kp: [Bk, Dp], keys with rows padded to Dp (lanes = head dim)
  AlignedBuffer<T> dkt;     // dkt: [D, Bk], dK_j / scale accumulator, transposed
  AlignedBuffer<T> dvt;     // dvt: [D, Bk], dV_j accumulator, transposed
  AlignedBuffer<T> prob;    // prob: [Bq, Bk], probabilities of the current tile
  AlignedBuffer<T> ds;      // ds: [Bq, Bk], dS of the current tile
  AlignedBuffer<T> mask;    // mask: [Bq, Bk], attention dropout's multipliers of the current tile
  AlignedBuffer<T> mrow;    // mrow: [Bq], one key's multipliers, before the transpose into mask
  AlignedBuffer<T> dq_acc;  // dq_acc: [Tq, Dp], dQ / scale accumulator for one head
};

// dQ_i += dS K_j for rows [0, rows): lanes run over the (padded) head dim,
// chunked into at most kChunkVecs vectors per strip.
//   ds: [rows, Bk], kp: [n, Dp], dq_acc: [rows, Dp]
template <typename T, int NR>
void dq_chunk(int64_t rows, int64_t n, const T* ds, const T* kp, int64_t padded_dim,
              T* dq_acc) {
  constexpr int L = kLanes<T>;
  tile_gemm<T, NR>(
      rows, n, ds, kBwdBlockK, 1, kp, padded_dim,
      [&](int64_t r, int vi) { return vec_load(dq_acc + r * padded_dim + vi * L); },
      [&](int64_t r, int vi, Vec<T> a) { vec_store(dq_acc + r * padded_dim + vi * L, a); });
}

template <typename T>
void dq_update(int64_t rows, int64_t n, const T* ds, const T* kp, int64_t padded_dim,
               T* dq_acc) {
  constexpr int L = kLanes<T>;
  for_vector_chunks(padded_dim / L, [&](auto nv, int64_t v0) {
    dq_chunk<T, decltype(nv)::value>(rows, n, ds, kp + v0 * L, padded_dim, dq_acc + v0 * L);
  });
}

// One key block: keys [j0, j0 + n) of head (b, h). Accumulates this block's
// share of dQ into dq_acc and writes dK_j, dV_j; or, when the head's only
// block (dq_direct: one key block and one query block, D whole vectors),
// writes dQ's rows into dq_direct itself.
//   lse2: [Tq] base-2 lse of this head (+inf for rows that see no key)
//   delta: [Tq] rowsum(dO * O) of this head
//   dq_acc: [Tq, Dp]
// NR: key vectors the tile products run over, enough for the block's n keys
// (lanes from NR * L to kBwdBlockK are neither computed nor read).
template <typename S, typename T, int NR>
void backward_key_block_nr(const AttentionBackwardParams<S, T>& p, int64_t b, int64_t h, int64_t j0,
                           int64_t key_end, const T* lse2, const T* delta, T* dq_acc, S* dq_direct,
                           BackwardScratch<T>& scratch) {
  using V = Vec<T>;
  constexpr int L = kLanes<T>;
  static_assert(NR * L <= kBwdBlockK);
  constexpr int64_t Bk = kBwdBlockK;
  const int64_t D = p.head_dim, Tq = query_rows(p, b);
  const int64_t Dp = round_up(D, L);
  const int64_t n = std::min(Bk, key_end - j0);

  const S* q = p.q + q_offset(p, b, p.q_stride_b, p.q_stride_t) + h * p.q_stride_h;  // q: [Tq, D], row stride q_stride_t
  const S* k = p.k + kv_offset(p, b, p.k_stride_b, p.k_stride_t) + h * p.k_stride_h + j0 * p.k_stride_t;  // k: [n, D]
  const S* v = p.v + kv_offset(p, b, p.v_stride_b, p.v_stride_t) + h * p.v_stride_h + j0 * p.v_stride_t;  // v: [n, D]
  const S* d_o = p.d_o + q_offset(p, b, p.do_stride_b, p.do_stride_t) + h * p.do_stride_h;  // d_o: [Tq, D], strided
  S* dk = p.dk + kv_offset(p, b, p.dk_stride_b, p.dk_stride_t) + h * p.dk_stride_h + j0 * p.dk_stride_t;  // dk: [n, D]
  S* dv = p.dv + kv_offset(p, b, p.dv_stride_b, p.dv_stride_t) + h * p.dv_stride_h + j0 * p.dv_stride_t;  // dv: [n, D]
  T* kt = scratch.kt.data();
  T* vt = scratch.vt.data();
  T* kp = scratch.kp.data();
  T* dkt = scratch.dkt.data();
  T* dvt = scratch.dvt.data();
  T* prob = scratch.prob.data();
  T* ds = scratch.ds.data();
  T* mask = scratch.mask.data();
  const bool drop = p.dropout.p > 0;

  // Pack K_j, V_j once for all query blocks. Padding keys (c >= n) are zero
  // in kt/vt and their probabilities are masked to 0 below.
  // Only the NR * L lanes the products read and write are packed or cleared
  // (a short sentence's block uses a quarter of them).
  const T k_scale = p.scale * static_cast<T>(kLog2e);
  rows_to_lanes(k, p.k_stride_t, n, NR * L, D, k_scale, kt, Bk);
  rows_to_lanes(v, p.v_stride_t, n, NR * L, D, T(1), vt, Bk);
  if (dq_direct == nullptr) {  // (a direct dQ reads K's rows in place)
    for (int64_t c = 0; c < n; ++c) {
      scaled_row(k + c * p.k_stride_t, D, T(1), kp + c * Dp);
      std::fill(kp + c * Dp + D, kp + (c + 1) * Dp, T(0));
    }
  }

  const auto iota = lane_iota<T>();
  // Causal: query rows before j0 see none of these keys.
  const int64_t q_begin = p.causal ? j0 : 0;
  // One query block and rows of whole vectors: pass 3 writes dK's and dV's
  // rows itself.
  const bool rows_out = Tq - q_begin <= kBwdBlockQ && D % L == 0;
  for (int64_t i0 = q_begin; i0 < Tq; i0 += kBwdBlockQ) {
    const int64_t rows = std::min(kBwdBlockQ, Tq - i0);
    const S* q_i = q + i0 * p.q_stride_t;  // q_i: [rows, D]
    const S* do_i = d_o + i0 * p.do_stride_t;  // do_i: [rows, D], row stride do_stride_t
    const T* lse2_i = lse2 + i0;
    const T* delta_i = delta + i0;
    const bool causal_mask = p.causal && j0 + n - 1 > i0;
    const bool needs_mask = causal_mask || n < NR * L;

    // pass 1: P = exp2(S - lse) with S = Q_i K_j^T recomputed (base 2)
    tile_gemm<T, NR>(
        rows, D, q_i, p.q_stride_t, 1, kt, Bk, [](int64_t, int) { return V{}; },
        [&](int64_t r, int vi, V s) {
          V e = vec_exp2(s - lse2_i[r]);
          if (needs_mask) {
            // Key j0 + c is visible to row i0 + r iff c < n and c <= i0 + r - j0.
            const int64_t last = causal_mask ? std::clamp<int64_t>(i0 + r - j0, -1, n - 1) : n - 1;
            e = (iota + vi * L) > static_cast<int>(last) ? V{} : e;
          }
          vec_store(prob + r * Bk + vi * L, e);
        });

    // Attention dropout: the tile's multipliers M as [rows, Bk] (lanes =
    // keys). Each key's are one run of query channels, drawn and transposed;
    // keys past n stay 0 (their P is 0 already).
    if (drop) {
      T* mrow = scratch.mrow.data();
      std::fill(mask, mask + rows * Bk, T(0));
      for (int64_t c = 0; c < n; ++c) {
        philox::mask_row<T>(p.dropout, b * p.heads + h, j0 + c, rows, mrow, i0);
        for (int64_t r = 0; r < rows; ++r) mask[r * Bk + c] = mrow[r];
      }
    }

    // pass 2: dS = P * (dP - delta), where dP = dO_i V_j^T (times M under
    // dropout: the output used P * M). delta = rowsum(dO * O) holds either way.
    tile_gemm<T, NR>(
        rows, D, do_i, p.do_stride_t, 1, vt, Bk, [](int64_t, int) { return V{}; },
        [&](int64_t r, int vi, V dp) {
          // Rounded before the subtraction: left to the compiler, the product
          // and the subtraction became one FMA in some copies of this loop
          // and not in others, so a sentence's gradients depended on which
          // block layout it went through (packed or padded, one query
          // block or several).
          if (drop) dp = detail::vec_rounded(dp * vec_load(mask + r * Bk + vi * L));
          vec_store(ds + r * Bk + vi * L, vec_load(prob + r * Bk + vi * L) * (dp - delta_i[r]));
        });
    // dV takes the probabilities as applied: P * M.
    if (drop) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int vi = 0; vi < NR; ++vi) {
          const int64_t x = r * Bk + vi * L;
          vec_store(prob + x, vec_load(prob + x) * vec_load(mask + x));
        }
      }
    }

    if (rows_out) {
      // pass 3, one query block, head dimension on the lanes: dV_j = P^T dO_i
      // and dK_j = scale * dS^T Q_i, dO_i's and Q_i's rows read in place and
      // dV's and dK's rows written directly: the same products in the same
      // order as the transposed accumulators below and their transpose back.
      rows_times_rows(n, rows, prob, 1, Bk, do_i, p.do_stride_t, D, [](int64_t) { return T(1); }, dv,
                      p.dv_stride_t);
      rows_times_rows(n, rows, ds, 1, Bk, q_i, p.q_stride_t, D, [&](int64_t) { return p.scale; }, dk,
                      p.dk_stride_t);
      // pass 4 the same way when this is the head's only block: dQ_i =
      // scale * dS K_j, K_j's rows read in place and dQ's rows written (the
      // same FMAs from zero and the same scaling as through dq_acc).
      if (dq_direct != nullptr) {
        rows_times_rows(rows, n, ds, Bk, 1, k, p.k_stride_t, D, [&](int64_t) { return p.scale; },
                        dq_direct + i0 * p.dq_stride_t, p.dq_stride_t);
      } else {
        dq_update(rows, n, ds, kp, Dp, dq_acc + i0 * Dp);
      }
      return;
    }

    // pass 3: dV_j^T += dO_i^T P and dK_j^T += Q_i^T dS (scale applied at
    // the end). The first query block overwrites the accumulators, so they
    // never need clearing.
    const bool first = i0 == q_begin;
    tile_gemm<T, NR>(
        D, rows, do_i, 1, p.do_stride_t, prob, Bk,
        [&](int64_t d, int vi) { return first ? V{} : vec_load(dvt + d * Bk + vi * L); },
        [&](int64_t d, int vi, V a) { vec_store(dvt + d * Bk + vi * L, a); });
    tile_gemm<T, NR>(
        D, rows, q_i, 1, p.q_stride_t, ds, Bk,
        [&](int64_t d, int vi) { return first ? V{} : vec_load(dkt + d * Bk + vi * L); },
        [&](int64_t d, int vi, V a) { vec_store(dkt + d * Bk + vi * L, a); });

    // pass 4: dQ_i += dS K_j (scale applied when dq is written)
    dq_update(rows, n, ds, kp, Dp, dq_acc + i0 * Dp);
  }

  // Transpose the dK_j, dV_j accumulators back into [n, D] rows.
  lanes_to_rows(dkt, Bk, n, D, dk, p.dk_stride_t, [&](int64_t) { return p.scale; });
  lanes_to_rows(dvt, Bk, n, D, dv, p.dv_stride_t, [](int64_t) { return T(1); });
}

template <typename S, typename T>
void backward_key_block(const AttentionBackwardParams<S, T>& p, int64_t b, int64_t h, int64_t j0,
                        int64_t key_end, const T* lse2, const T* delta, T* dq_acc, S* dq_direct,
                        BackwardScratch<T>& scratch) {
  with_lane_vectors<T, kBwdBlockK>(std::min(kBwdBlockK, key_end - j0), [&](auto nr) {
    backward_key_block_nr<S, T, decltype(nr)::value>(p, b, h, j0, key_end, lse2, delta, dq_acc, dq_direct,
                                                     scratch);
  });
}

// a * b + c rounded like the micro-kernel's `acc += x * w`: the compiler
// contracts that to one fma where the target has fma, so fuse here too;
// elsewhere it is a multiply and an add.
template <typename T>
inline T kernel_mul_add(T a, T b, T c) {
#if defined(FP_FAST_FMAF) && defined(FP_FAST_FMA)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// delta[i] = dO_i . O_i, summed exactly like the micro-kernel sums
// dP = dO_i . V_j: one multiply-add chain in increasing d. A row that sees a
// single key has O_i == V_j bit for bit (its weight is exactly 1), so
// dP - delta is then exactly 0, and so are its dS, dQ and dK contributions,
// as with rowsum(P * dP). Any other summation order leaves rounding noise
// there, several times LibTorch's float32 error on such rows. Eight rows at
// a time keep eight independent chains in flight.
//   d_o: [rows, D] (row stride do_stride), o: [rows, D] (row stride o_stride), delta: [rows]
template <typename S, typename T>
void row_dots(int64_t rows, int64_t head_dim, const S* d_o, int64_t do_stride, const S* o,
              int64_t o_stride, T* delta) {
  constexpr int64_t kRows = 8;
  int64_t i0 = 0;
  for (; i0 + kRows <= rows; i0 += kRows) {
    T sum[kRows] = {};
    for (int64_t d = 0; d < head_dim; ++d) {
      for (int64_t r = 0; r < kRows; ++r) {
        sum[r] = kernel_mul_add(load_as<T>(d_o[(i0 + r) * do_stride + d]), load_as<T>(o[(i0 + r) * o_stride + d]),
                                sum[r]);
      }
    }
    std::copy(sum, sum + kRows, delta + i0);
  }
  for (; i0 < rows; ++i0) {
    T sum = 0;
    for (int64_t d = 0; d < head_dim; ++d) {
      sum = kernel_mul_add(load_as<T>(d_o[i0 * do_stride + d]), load_as<T>(o[i0 * o_stride + d]), sum);
    }
    delta[i0] = sum;
  }
}

// Keys at or beyond this index receive no gradient in batch row b.
template <typename S, typename T>
int64_t backward_key_end(const AttentionBackwardParams<S, T>& p, int64_t b) {
  const int64_t rows = query_rows(p, b);
  // No query row: no key receives a gradient (and the key blocks, which
  // write dK and dV from their first query block, are never visited).
  if (rows == 0) return 0;
  int64_t key_end = key_count(p, b);
  // Causal: key j is seen only by rows i >= j, and there are query_rows rows.
  if (p.causal) key_end = std::min(key_end, rows);
  return key_end;
}

}  // namespace

template <typename S, typename T>
void flash_attention_forward(const AttentionForwardParams<S, T>& params) {
  const int64_t B = params.batch, H = params.heads, Tq = params.q_len, Tk = params.k_len;
  const int64_t D = params.head_dim;
  if (Tq <= kRowKernelMaxQ && !(params.dropout.p > 0)) {
    // Decoding shapes: one task per (b, h, query row), K and V read in place.
    // (Training with attention dropout takes the block kernel at any length.)
    const int max_threads = omp_get_max_threads();
    std::vector<RowScratch<T>> scratches;
    scratches.reserve(static_cast<size_t>(max_threads));
    for (int t = 0; t < max_threads; ++t) scratches.emplace_back(Tk, D);
    const int64_t rows = B * H * Tq;
    detail::parallel_for(rows, rows > 1, [&](int64_t r) {
      const int64_t b = r / (H * Tq), i = r % Tq;
      if (i >= query_rows(params, b)) return;  // past a packed sentence's queries
      forward_query_row(params, b, r / Tq % H, i, scratches[static_cast<size_t>(omp_get_thread_num())]);
    });
    return;
  }
  const int64_t num_q_blocks = (Tq + kBlockQ - 1) / kBlockQ;
  const int64_t num_tasks = B * H * num_q_blocks;

  // Every query block streams all of K and V of its head, so long strided
  // K/V get contiguous copies (see kPackSpanBytes).
  // (With kv_rows, K and V are read in place: their batch is not B; packed
  // sentences are read in place too.)
  AttentionForwardParams<S, T> p = params;
  AlignedBuffer<S> k_copy, v_copy;
  const bool in_place = p.kv_rows != nullptr || p.kv_starts != nullptr;
  if (!in_place && worth_packing<S>(p.k_stride_t, Tk, D)) {
    k_copy.reset(B * H * Tk * D);
    copy_contiguous(p.k, p.k_stride_b, p.k_stride_h, p.k_stride_t, B, H, Tk, D, k_copy.data());
    p.k = k_copy.data();
    p.k_stride_b = H * Tk * D, p.k_stride_h = Tk * D, p.k_stride_t = D;
  }
  if (!in_place && worth_packing<S>(p.v_stride_t, Tk, D)) {
    v_copy.reset(B * H * Tk * D);
    copy_contiguous(p.v, p.v_stride_b, p.v_stride_h, p.v_stride_t, B, H, Tk, D, v_copy.data());
    p.v = v_copy.data();
    p.v_stride_b = H * Tk * D, p.v_stride_h = Tk * D, p.v_stride_t = D;
  }

  // Scratch is allocated up front so an allocation failure throws here
  // instead of terminating inside the parallel region.
  const int max_threads = omp_get_max_threads();
  std::vector<ForwardScratch<T>> scratches;
  scratches.reserve(static_cast<size_t>(max_threads));
  for (int t = 0; t < max_threads; ++t) scratches.emplace_back(D);

  detail::in_team([&] {
    ForwardScratch<T>& scratch = scratches[static_cast<size_t>(omp_get_thread_num())];
    // Dynamic: causal blocks differ in cost. Within a head the heaviest
    // (last) query blocks go first so the tail of the schedule is short.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < num_tasks; ++task) {
      const int64_t bh = task / num_q_blocks;
      const int64_t qb = num_q_blocks - 1 - task % num_q_blocks;
      forward_query_block(p, bh / H, bh % H, qb * kBlockQ, scratch);
    }
  });
}

template <typename S, typename T>
void flash_attention_backward(const AttentionBackwardParams<S, T>& params) {
  constexpr int L = kLanes<T>;
  const int64_t B = params.batch, H = params.heads, Tq = params.q_len, Tk = params.k_len;
  const int64_t D = params.head_dim;
  const int64_t BH = B * H;
  const int64_t Dp = round_up(D, L);
  if (BH == 0) return;

  // Every key block streams all of Q of its head (K_j and V_j are packed per
  // task anyway), so a long strided Q gets a contiguous copy.
  AttentionBackwardParams<S, T> p = params;
  AlignedBuffer<S> q_copy;
  if (p.q_starts == nullptr && worth_packing<S>(p.q_stride_t, Tq, D)) {
    q_copy.reset(B * H * Tq * D);
    copy_contiguous(p.q, p.q_stride_b, p.q_stride_h, p.q_stride_t, B, H, Tq, D, q_copy.data());
    p.q = q_copy.data();
    p.q_stride_b = H * Tq * D, p.q_stride_h = Tq * D, p.q_stride_t = D;
  }

  // Per-row constants of the softmax backward: lse in base 2 (+inf for rows
  // that see no key, so exp2(S - lse2) is 0 rather than NaN) and
  // delta = rowsum(dO * O) = rowsum(dP * P). Also clear the dK/dV rows of
  // keys no query can see; no task visits them.
  AlignedBuffer<T> lse2(BH * Tq), delta(BH * Tq);
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    for (int64_t i = 0, rows = query_rows(p, b); i < rows; ++i) {
      const T lse = p.lse[bh * Tq + i];
      lse2[bh * Tq + i] = lse == -std::numeric_limits<T>::infinity()
                              ? std::numeric_limits<T>::infinity()
                              : lse * static_cast<T>(kLog2e);
    }
    row_dots(query_rows(p, b), D, p.d_o + q_offset(p, b, p.do_stride_b, p.do_stride_t) + h * p.do_stride_h,
             p.do_stride_t, p.o + q_offset(p, b, p.o_stride_b, p.o_stride_t) + h * p.o_stride_h, p.o_stride_t,
             delta.data() + bh * Tq);
    const int64_t key_end = backward_key_end(p, b);
    S* dk = p.dk + kv_offset(p, b, p.dk_stride_b, p.dk_stride_t) + h * p.dk_stride_h;
    S* dv = p.dv + kv_offset(p, b, p.dv_stride_b, p.dv_stride_t) + h * p.dv_stride_h;
    // (packed sentences: only the sentence's own key rows exist)
    const int64_t key_rows = p.kv_starts != nullptr ? key_count(p, b) : Tk;
    for (int64_t j = key_end; j < key_rows; ++j) {
      store_zeros(dk + j * p.dk_stride_t, D);
      store_zeros(dv + j * p.dv_stride_t, D);
    }
  }

  // dQ_i collects contributions from every key block. With enough heads each
  // thread owns whole heads and accumulates dQ privately; otherwise the key
  // blocks of one head are shared out and per-thread dQ partials are summed.
  const int max_threads = omp_get_max_threads();
  const bool own_heads = max_threads == 1 || BH % max_threads == 0 || BH >= 4 * max_threads;
  std::vector<BackwardScratch<T>> scratches;
  scratches.reserve(static_cast<size_t>(max_threads));
  for (int t = 0; t < max_threads; ++t) scratches.emplace_back(D, Dp, Tq);

#pragma omp parallel num_threads(max_threads)
  {
    BackwardScratch<T>& scratch = scratches[static_cast<size_t>(omp_get_thread_num())];
    T* dq_acc = scratch.dq_acc.data();
    if (own_heads) {
#pragma omp for schedule(dynamic, 1)
      for (int64_t bh = 0; bh < BH; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        const T* lse2_bh = lse2.data() + bh * Tq;
        const T* delta_bh = delta.data() + bh * Tq;
        const int64_t key_end = backward_key_end(p, b);
        // Only this sentence's rows: a packed batch's Tq is its longest.
        const int64_t rows = query_rows(p, b);
        S* dq = p.dq + q_offset(p, b, p.dq_stride_b, p.dq_stride_t) + h * p.dq_stride_h;  // dq: [Tq, D], strided
        // One key block and one query block (a sentence of up to 64
        // tokens): that block writes dQ itself.
        if (key_end > 0 && key_end <= kBwdBlockK && rows <= kBwdBlockQ && D % L == 0) {
          backward_key_block(p, b, h, 0, key_end, lse2_bh, delta_bh, dq_acc, dq, scratch);
          continue;
        }
        std::fill(dq_acc, dq_acc + rows * Dp, T(0));
        for (int64_t j0 = 0; j0 < key_end; j0 += kBwdBlockK) {
          backward_key_block(p, b, h, j0, key_end, lse2_bh, delta_bh, dq_acc, static_cast<S*>(nullptr), scratch);
        }
        for (int64_t i = 0; i < rows; ++i) scaled_row(dq_acc + i * Dp, D, p.scale, dq + i * p.dq_stride_t);
      }
    } else {
      const int num_threads = omp_get_num_threads();
      for (int64_t bh = 0; bh < BH; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        const T* lse2_bh = lse2.data() + bh * Tq;
        const T* delta_bh = delta.data() + bh * Tq;
        const int64_t key_end = backward_key_end(p, b);
        const int64_t num_k_blocks = (key_end + kBwdBlockK - 1) / kBwdBlockK;
        std::fill(dq_acc, dq_acc + query_rows(p, b) * Dp, T(0));
        // Causal: early key blocks see the most query rows; they go first.
#pragma omp for schedule(dynamic, 1)
        for (int64_t kb = 0; kb < num_k_blocks; ++kb) {
          backward_key_block(p, b, h, kb * kBwdBlockK, key_end, lse2_bh, delta_bh, dq_acc,
                             static_cast<S*>(nullptr), scratch);
        }
        // The implicit barriers of both loops separate this sum from the
        // accumulation above and from the clearing of the next head.
        S* dq = p.dq + q_offset(p, b, p.dq_stride_b, p.dq_stride_t) + h * p.dq_stride_h;  // dq: [Tq, D], strided
        const int64_t rows = query_rows(p, b);
#pragma omp for schedule(static)
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t d = 0; d < D; ++d) {
            T sum = 0;
            for (int t = 0; t < num_threads; ++t) {
              sum += scratches[static_cast<size_t>(t)].dq_acc[i * Dp + d];
            }
            store_as(dq + i * p.dq_stride_t + d, sum * p.scale);
          }
        }
      }
    }
  }
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
