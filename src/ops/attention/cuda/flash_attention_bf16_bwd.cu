// FlashAttention-2 backward for bf16 inputs on tensor cores (sm_80 and
// later): mma.sync m16n8k16 with bf16 operands and float32 accumulators,
// the forward's primitives (flash_mma.cuh) and its lse.
//
// Three launches on one stream:
//   step 1 (delta kernel): delta_i = sum_d dO[i][d] O[i][d] in float32, one
//           warp per query row.
//   step 2 (dK/dV kernel): one block per (b, h, kBlockRows keys); warp w
//           owns kMTiles m-tiles of 16 keys (two at D = 64, one at D = 128:
//           the tiling, BwdTilings below) and keeps their dK and dV in
//           registers while query tiles stream through shared memory:
//             pass 1: S^T = K Q^T and dP^T = V dO^T (keys are the mma's
//                     rows, queries its columns);
//             pass 2: P^T = exp(scale S^T - lse) masked, dS^T = P^T (dP^T - delta);
//             pass 3: dV += P^T dO and dK += dS^T Q. With keys as rows, the
//                     accumulators of P^T and dS^T are already the A operand
//                     of these products (two n8 tiles = one k16 step), so
//                     nothing goes through shared memory; dO and Q are read
//                     as B operands with ldmatrix.trans.
//   step 3 (dQ kernel): one block per (b, h, 64 queries); warp w owns queries
//           16w .. 16w + 15 and keeps their dQ in registers while key tiles
//           stream through: S = Q K^T, dP = dO V^T, dS = P (dP - delta),
//           dQ += dS K (dS from the accumulators as the A operand, K by
//           ldmatrix.trans).
// Step 3 recomputes S and dP instead of adding each key block's dQ with
// atomics: 7 products per tile instead of 5, but no float atomics, so every
// gradient is the same bits on every run and dQ is written once, as bf16.
// That is the deterministic mode. The default adds dQ with atomics instead:
//   step 2, pass 4: dS^T goes to shared memory (bf16), and the block adds
//           its dQ patch dS K for this query tile into a float32 buffer
//           (atomicAdd; float2 on sm_90);
//   step 3': one elementwise pass, dQ = scale * buffer as bf16.
// The order of the atomic adds varies from run to run, so dQ's last bits do.
// Streamed tiles are double-buffered: tile it + 1 is copied (cp.async) while
// tile it is multiplied.
//
// Numerics: products and sums in float32; P and dS are rounded to bf16
// before they enter a product (as in FlashAttention-2); gradients are stored
// as bf16. Masking as in every backend: a key is seen by query i when
// j < key_lengths[b] and (not causal or j <= i); a query row with no visible
// key has lse = -inf and gets dQ = 0; padding keys get dK = dV = 0.
//
// Shapes: as the bf16 forward (head dims 8..128 in multiples of 8, padded to
// 64 or 128 with zero columns; 16-byte aligned q, k, v, dO rows);
// flash_attention_backward_bf16_supported says whether a call qualifies.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "ops/attention/cuda/attention_cuda.h"
#include "ops/attention/cuda/flash_kernel_traits.h"
#include "ops/attention/cuda/flash_mma.cuh"
#include "ops/attention/cuda/flash_tile.cuh"

namespace nmt::ops::cuda {
namespace {

using flash::cp_async_commit;
using flash::cp_async_wait;
using namespace flash::mma;

constexpr int kDeltaWarps = 8;

using Params = AttentionBackwardParams<bf16, float>;

template <int kD, class Tiling = flash::BwdTiling<>>
using Traits = flash::FlashBwdMmaTraits<kD, flash::kTargetArch, Tiling>;

__device__ __forceinline__ float bf16_bits_to_float(bf16 x) {
  return __uint_as_float(static_cast<uint32_t>(x.bits) << 16);
}

// ---------------------------------------------------------------------------
// step 1: delta[bh * Tq + i] = rowsum(dO * O), one warp per row.
// ---------------------------------------------------------------------------
__global__ void __launch_bounds__(kDeltaWarps * 32)
    flash_backward_delta_bf16_kernel(const Params p, float* delta) {
  const int64_t rows = p.batch * p.heads * p.q_len;
  const int lane = threadIdx.x % 32;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kDeltaWarps + threadIdx.x / 32; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kDeltaWarps) {
    const int64_t bh = row / p.q_len, i = row % p.q_len;
    const int64_t b = bh / p.heads, h = bh % p.heads;
    const bf16* o = p.o + b * p.o_stride_b + h * p.o_stride_h + i * p.o_stride_t;
    const bf16* d_o = p.d_o + b * p.do_stride_b + h * p.do_stride_h + i * p.do_stride_t;
    float acc = 0.0f;
    for (int d = lane; d < p.head_dim; d += 32)
      acc += bf16_bits_to_float(o[d]) * bf16_bits_to_float(d_o[d]);
#pragma unroll
    for (int m = 16; m > 0; m /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, m);
    if (lane == 0) delta[row] = acc;
  }
}

// One row of a gradient patch, rows g + 8r of the warp's m-tile, stored as
// bf16 pairs (times `scale`): acc[n][2r + c] is column 8n + 2t + c.
template <int kOutTiles>
__device__ __forceinline__ void store_rows(const float (&acc)[kOutTiles][4], bf16* base,
                                           int64_t stride_t, int row0, int row_limit,
                                           int head_dim, float scale, int lane) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + acc_row(lane, 2 * r);
    if (row >= row_limit) continue;
    bf16* out = base + static_cast<int64_t>(row) * stride_t;
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      const int d = 8 * n + acc_col(lane, 2 * r);
      if (d < head_dim)  // head_dim is even: columns d and d + 1 are both in or both out
        *reinterpret_cast<uint32_t*>(out + d) =
            pack_bf16(acc[n][2 * r] * scale, acc[n][2 * r + 1] * scale);
    }
  }
}

// Pass 1 of both kernels: S = A1 B1^T and dP = A2 B2^T for the warp's
// kMTiles m-tiles of 16 rows from row0 of the fixed tiles a1, a2
// ([rows][kStride]) against the kStreamRows rows of the streamed tiles b1, b2
// ([rows][kStride]), over the head dim. Each B fragment read from shared
// memory feeds every m-tile. dK/dV kernel: (K, Q) and (V, dO); dQ kernel:
// (Q, K) and (dO, V).
template <class Tr>
__device__ __forceinline__ void score_pair(float (&s)[Tr::kMTiles][Tr::kScoreTiles][4],
                                           float (&dp)[Tr::kMTiles][Tr::kScoreTiles][4], const bf16* a1,
                                           const bf16* b1, const bf16* a2, const bf16* b2, int row0, int lane) {
  constexpr int kStride = Tr::kStride;
  constexpr int kM = Tr::kMTiles;
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int n = 0; n < Tr::kScoreTiles; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) s[m][n][c] = dp[m][n][c] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < Tr::kKSteps; ++ks) {
    uint32_t a1_frag[kM][4], a2_frag[kM][4];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      load_a<kStride>(a1_frag[m], a1, row0 + 16 * m, ks * 16, lane);
      load_a<kStride>(a2_frag[m], a2, row0 + 16 * m, ks * 16, lane);
    }
#pragma unroll
    for (int np = 0; np < Tr::kScoreTiles / 2; ++np) {
      uint32_t b1_frag[4], b2_frag[4];
      load_b_nk<kStride>(b1_frag, b1, np * 16, ks * 16, lane);
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        mma_16816(s[m][2 * np], a1_frag[m], b1_frag[0], b1_frag[1]);
        mma_16816(s[m][2 * np + 1], a1_frag[m], b1_frag[2], b1_frag[3]);
      }
      load_b_nk<kStride>(b2_frag, b2, np * 16, ks * 16, lane);
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        mma_16816(dp[m][2 * np], a2_frag[m], b2_frag[0], b2_frag[1]);
        mma_16816(dp[m][2 * np + 1], a2_frag[m], b2_frag[2], b2_frag[3]);
      }
    }
  }
}

// Atomic dQ, pass 4 of the dK/dV kernel: this query tile's dQ patch from
// this block's keys, dQ[q0 + .., :] += dS K, added into the float32 dq
// ([Tq][head_dim] of this head; unscaled). dS comes from ds_s, stored
// transposed ([key][query]), as A fragments by ldmatrix.trans; K from k_s
// ([key][dim]) as B fragments by ldmatrix.trans. Warp w takes m-tile
// w / kDqWarpsPerM (16 queries) and kDqOutTiles n8 tiles of the head dim.
template <class Tr>
__device__ __forceinline__ void add_dq_patch(float* dq, const bf16* ds_s, const bf16* k_s, int q0, int tq,
                                             int head_dim, int warp, int lane) {
  const int m0 = (warp / Tr::kDqWarpsPerM) * 16;
  const int n_first = (warp % Tr::kDqWarpsPerM) * Tr::kDqOutTiles;
  float acc[Tr::kDqOutTiles][4];
#pragma unroll
  for (int n = 0; n < Tr::kDqOutTiles; ++n)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[n][c] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < Tr::kBlockSteps; ++ks) {
    uint32_t a[4];
    load_a_km<Tr::kDsStride>(a, ds_s, m0, ks * 16, lane);
#pragma unroll
    for (int dd = 0; dd < Tr::kDqOutTiles / 2; ++dd) {
      uint32_t b[4];
      load_b_kn<Tr::kStride>(b, k_s, ks * 16, (n_first + 2 * dd) * 8, lane);
      mma_16816(acc[2 * dd], a, b[0], b[1]);
      mma_16816(acc[2 * dd + 1], a, b[2], b[3]);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = q0 + m0 + acc_row(lane, 2 * r);
    if (i >= tq) continue;
    float* row = dq + static_cast<int64_t>(i) * head_dim;
#pragma unroll
    for (int n = 0; n < Tr::kDqOutTiles; ++n) {
      const int d = 8 * (n_first + n) + acc_col(lane, 2 * r);
      if (d >= head_dim) continue;  // head_dim is even: d + 1 is in too
#if __CUDA_ARCH__ >= 900
      atomicAdd(reinterpret_cast<float2*>(row + d), make_float2(acc[n][2 * r], acc[n][2 * r + 1]));
#else
      atomicAdd(row + d, acc[n][2 * r]);
      atomicAdd(row + d + 1, acc[n][2 * r + 1]);
#endif
    }
  }
}

// dq = scale * dq_accum as bf16 pairs, dq_accum [B*H][Tq][head_dim] float32.
__global__ void flash_backward_dq_convert_bf16_kernel(const Params p, const float* dq_accum) {
  const int64_t pairs = p.batch * p.heads * p.q_len * (p.head_dim / 2);
  for (int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; x < pairs;
       x += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = 2 * (x % (p.head_dim / 2)), row = x / (p.head_dim / 2);
    const int64_t i = row % p.q_len, bh = row / p.q_len, b = bh / p.heads, h = bh % p.heads;
    const float2 v = *reinterpret_cast<const float2*>(dq_accum + row * p.head_dim + d);
    *reinterpret_cast<uint32_t*>(p.dq + b * p.dq_stride_b + h * p.dq_stride_h + i * p.dq_stride_t + d) =
        pack_bf16(v.x * p.scale, v.y * p.scale);
  }
}

// ---------------------------------------------------------------------------
// step 2: dK, dV. grid.x = B * H * n_kblocks (key block fastest); block =
// Tr::kThreads. Long, on purpose: the passes below share the accumulators and
// row statistics held in registers from the first key tile to the epilogue;
// as separate functions they would pass them all by reference and read out of
// order. Each pass is narrated where it starts.
// ---------------------------------------------------------------------------
template <int kD, class Tiling>
__global__ void __launch_bounds__(Traits<kD, Tiling>::kThreads, Traits<kD, Tiling>::kMinBlocksPerSm)
    flash_backward_dkdv_bf16_kernel(const Params p, const float* delta, float* dq_accum, int n_kblocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Tr = Traits<kD, Tiling>;
  constexpr int kStride = Tr::kStride;
  constexpr int kBq = Tr::kStreamRows;  // queries per step
  constexpr int kM = Tr::kMTiles;       // m-tiles (16 keys each) per warp
  constexpr int kTileElems = kBq * kStride;

  extern __shared__ uint4 smem_u4[];
  bf16* smem = reinterpret_cast<bf16*>(smem_u4);
  bf16* k_s = smem + Tr::kSmemFixedA;    // k_s: [kBlockRows][kStride], this block's keys
  bf16* v_s = smem + Tr::kSmemFixedB;    // v_s: [kBlockRows][kStride]
  bf16* q_s = smem + Tr::kSmemStreamA;   // q_s: [2][kBq][kStride]
  bf16* do_s = smem + Tr::kSmemStreamB;  // do_s: [2][kBq][kStride]
  bf16* ds_s = smem + Tr::kSmemDS;       // ds_s: [kBlockRows][kDsStride], dS^T of this step (atomic dQ)
  // stats: [2 buffers][lse (log2-scaled), delta][kBq]
  float* stats = reinterpret_cast<float*>(reinterpret_cast<char*>(smem_u4) + Tr::kSmemStatsOffsetBytes);

  // Block 0 of a head has the most query tiles when causal.
  const flash::BlockPlace at =
      flash::block_place(p, n_kblocks, /*longest_first=*/false, Tiling::kHeadsFastest && p.causal);
  const int64_t bh = at.bh, b = at.b, h = at.h;
  const int tq = static_cast<int>(p.q_len);
  const int tk = static_cast<int>(p.k_len);
  const int head_dim = static_cast<int>(p.head_dim);
  const bool causal = p.causal;
  const int k0 = at.block * Tr::kBlockRows;
  const int key_len = flash::key_length(p, b);

  // This head's q / dO: [Tq, D], k / v: [Tk, D], lse / delta: [Tq].
  const bf16* q_head = p.q + b * p.q_stride_b + h * p.q_stride_h;
  const bf16* k_head = p.k + b * p.k_stride_b + h * p.k_stride_h;
  const bf16* v_head = p.v + b * p.v_stride_b + h * p.v_stride_h;
  const bf16* do_head = p.d_o + b * p.do_stride_b + h * p.do_stride_h;
  const float* lse_head = p.lse + bh * tq;
  const float* delta_head = delta + bh * tq;

  // Query tiles that see a key of this block: from the tile holding query k0
  // when causal (query i sees keys j <= i), none when every key is padding.
  const int n_qtiles = (tq + kBq - 1) / kBq;
  const int qt_begin = causal ? min(k0 / kBq, n_qtiles) : 0;
  const int n_steps = k0 < key_len ? n_qtiles - qt_begin : 0;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int key_row0 = warp * Tr::kRowsPerWarp;  // the warp's first key, within the block

  // Query tile `step` into buffer `buf`: Q and dO by cp.async, lse and delta
  // by plain stores (visible after the next __syncthreads).
  auto load_step = [&](int step, int buf) {
    const int q0 = (qt_begin + step) * kBq;
    load_tile_bf16<kBq, Tr>(q_s + buf * kTileElems, q_head, p.q_stride_t, q0, tq, head_dim, tid);
    load_tile_bf16<kBq, Tr>(do_s + buf * kTileElems, do_head, p.do_stride_t, q0, tq, head_dim, tid);
    if (tid < kBq) {
      const int i = q0 + tid;
      stats[(2 * buf) * kBq + tid] = i < tq ? lse_head[i] * kLog2e : 0.0f;
      stats[(2 * buf + 1) * kBq + tid] = i < tq ? delta_head[i] : 0.0f;
    }
  };

  // Prologue: two copy groups, K and V | query tile 0.
  load_tile_bf16<Tr::kBlockRows, Tr>(k_s, k_head, p.k_stride_t, k0, key_len, head_dim, tid);
  load_tile_bf16<Tr::kBlockRows, Tr>(v_s, v_head, p.v_stride_t, k0, key_len, head_dim, tid);
  cp_async_commit();
  if (n_steps > 0) load_step(0, 0);
  cp_async_commit();

  // dk_acc[m], dv_acc[m]: keys k0 + key_row0 + 16m .. + 15, all head dims.
  float dk_acc[kM][Tr::kOutTiles][4];
  float dv_acc[kM][Tr::kOutTiles][4];
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int n = 0; n < Tr::kOutTiles; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) dk_acc[m][n][c] = dv_acc[m][n][c] = 0.0f;
  const float score_scale = p.scale * kLog2e;

  for (int step = 0; step < n_steps; ++step) {
    const int buf = step & 1;
    const int q0 = (qt_begin + step) * kBq;
    if (step + 1 < n_steps) load_step(step + 1, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // all but the newest group: K, V and this tile have landed
    __syncthreads();
    const bf16* qt = q_s + buf * kTileElems;
    const bf16* dot = do_s + buf * kTileElems;
    const float* lse_t = stats + (2 * buf) * kBq;
    const float* delta_t = stats + (2 * buf + 1) * kBq;

    // pass 1: S^T = K Q^T, dP^T = V dO^T; [16 keys x kBq queries] per m-tile.
    float s[kM][Tr::kScoreTiles][4];
    float dp[kM][Tr::kScoreTiles][4];
    score_pair<Tr>(s, dp, k_s, qt, v_s, dot, key_row0, lane);

    // pass 2: P^T and dS^T in place. s[m][n][c]: key k0 + key_row0 + 16m +
    // acc_row, query q0 + 8n + acc_col.
    const bool need_mask = k0 + Tr::kBlockRows > key_len || q0 + kBq > tq ||
                           (causal && k0 + Tr::kBlockRows - 1 > q0);
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int n = 0; n < Tr::kScoreTiles; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int qi = 8 * n + acc_col(lane, c);
          bool visible = true;
          if (need_mask) {
            const int i = q0 + qi;
            const int j = k0 + key_row0 + 16 * m + acc_row(lane, c);
            visible = i < tq && j < key_len && !(causal && j > i);
          }
          const float prob = visible ? fast_exp2(s[m][n][c] * score_scale - lse_t[qi]) : 0.0f;
          s[m][n][c] = prob;
          dp[m][n][c] = prob * (dp[m][n][c] - delta_t[qi]);
        }
    // Atomic dQ: the warp's rows of dS^T, rounded to bf16 as pass 3 rounds
    // them, into ds_s (row = key within the block, column = query).
    if (dq_accum != nullptr) {
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int n = 0; n < Tr::kScoreTiles; ++n)
#pragma unroll
          for (int r = 0; r < 2; ++r)
            *reinterpret_cast<uint32_t*>(ds_s + (key_row0 + 16 * m + acc_row(lane, 2 * r)) * Tr::kDsStride +
                                         8 * n + acc_col(lane, 2 * r)) =
                pack_bf16(dp[m][n][2 * r], dp[m][n][2 * r + 1]);
    }

    // pass 3: dV += P^T dO, dK += dS^T Q. n8 tiles 2kk, 2kk + 1 of an m-tile's
    // P^T / dS^T are its A fragment of k16 step kk (queries q0 + 16kk ..); dO
    // and Q as [query][dim] tiles give the B operand through ldmatrix.trans,
    // each fragment feeding every m-tile.
#pragma unroll
    for (int kk = 0; kk < Tr::kStreamSteps; ++kk) {
      uint32_t p_frag[kM][4], ds_frag[kM][4];
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        acc_to_a(p_frag[m], s[m], kk);
        acc_to_a(ds_frag[m], dp[m], kk);
      }
#pragma unroll
      for (int dd = 0; dd < Tr::kOutTiles / 2; ++dd) {
        uint32_t b_frag[4];
        load_b_kn<kStride>(b_frag, dot, kk * 16, dd * 16, lane);
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          mma_16816(dv_acc[m][2 * dd], p_frag[m], b_frag[0], b_frag[1]);
          mma_16816(dv_acc[m][2 * dd + 1], p_frag[m], b_frag[2], b_frag[3]);
        }
        load_b_kn<kStride>(b_frag, qt, kk * 16, dd * 16, lane);
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          mma_16816(dk_acc[m][2 * dd], ds_frag[m], b_frag[0], b_frag[1]);
          mma_16816(dk_acc[m][2 * dd + 1], ds_frag[m], b_frag[2], b_frag[3]);
        }
      }
    }
    if (dq_accum != nullptr) {
      __syncthreads();  // every warp's dS^T rows are in ds_s
      add_dq_patch<Tr>(dq_accum + bh * tq * head_dim, ds_s, k_s, q0, tq, head_dim, warp, lane);
    }
    // Every warp is done with this buffer (and ds_s) before the next step refills it.
    __syncthreads();
  }
  cp_async_wait<0>();  // nothing may be left in flight when the block exits

  // Epilogue: rows k0 + key_row0 + 16m + g (+ 8) of dK (times scale) and dV.
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    store_rows(dv_acc[m], p.dv + b * p.dv_stride_b + h * p.dv_stride_h, p.dv_stride_t,
               k0 + key_row0 + 16 * m, tk, head_dim, 1.0f, lane);
    store_rows(dk_acc[m], p.dk + b * p.dk_stride_b + h * p.dk_stride_h, p.dk_stride_t,
               k0 + key_row0 + 16 * m, tk, head_dim, p.scale, lane);
  }
#endif
}

// ---------------------------------------------------------------------------
// step 3: dQ. grid.x = B * H * n_qblocks (query block fastest); block = 128.
// (Long for the same reason as step 2.)
// ---------------------------------------------------------------------------
template <int kD>
__global__ void __launch_bounds__(Traits<kD>::kThreads, Traits<kD>::kMinBlocksPerSm)
    flash_backward_dq_bf16_kernel(const Params p, const float* delta, int n_qblocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Tr = Traits<kD>;
  static_assert(Tr::kMTiles == 1, "the dQ kernel owns one m-tile per warp");
  constexpr int kStride = Tr::kStride;
  constexpr int kBk = Tr::kStreamRows;  // keys per step
  constexpr int kTileElems = kBk * kStride;

  extern __shared__ uint4 smem_u4[];
  bf16* smem = reinterpret_cast<bf16*>(smem_u4);
  bf16* q_s = smem + Tr::kSmemFixedA;   // q_s: [64][kStride], this block's queries
  bf16* do_s = smem + Tr::kSmemFixedB;  // do_s: [64][kStride]
  bf16* k_s = smem + Tr::kSmemStreamA;  // k_s: [2][kBk][kStride]
  bf16* v_s = smem + Tr::kSmemStreamB;  // v_s: [2][kBk][kStride]

  const flash::BlockPlace at = flash::block_place(p, n_qblocks, /*longest_first=*/p.causal);
  const int64_t bh = at.bh, b = at.b, h = at.h;
  const int tq = static_cast<int>(p.q_len);
  const int head_dim = static_cast<int>(p.head_dim);
  const bool causal = p.causal;
  const int q0 = at.block * Tr::kBlockRows;
  const int key_len = flash::key_length(p, b);
  const int n_steps = (flash::visible_keys(key_len, causal, q0, Tr::kBlockRows, tq) + kBk - 1) / kBk;

  const bf16* q_head = p.q + b * p.q_stride_b + h * p.q_stride_h;
  const bf16* k_head = p.k + b * p.k_stride_b + h * p.k_stride_h;
  const bf16* v_head = p.v + b * p.v_stride_b + h * p.v_stride_h;
  const bf16* do_head = p.d_o + b * p.do_stride_b + h * p.do_stride_h;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int q_row0 = warp * Tr::kRowsPerWarp;  // the warp's first query, within the block

  // Prologue: two copy groups, Q and dO | key tile 0.
  load_tile_bf16<Tr::kBlockRows, Tr>(q_s, q_head, p.q_stride_t, q0, tq, head_dim, tid);
  load_tile_bf16<Tr::kBlockRows, Tr>(do_s, do_head, p.do_stride_t, q0, tq, head_dim, tid);
  cp_async_commit();
  if (n_steps > 0) {
    load_tile_bf16<kBk, Tr>(k_s, k_head, p.k_stride_t, 0, key_len, head_dim, tid);
    load_tile_bf16<kBk, Tr>(v_s, v_head, p.v_stride_t, 0, key_len, head_dim, tid);
  }
  cp_async_commit();

  // The lane's two query rows (acc_row 0 and 8 of the warp's m-tile): lse
  // (log2-scaled) and delta.
  float lse2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = q0 + q_row0 + acc_row(lane, 2 * r);
    lse2[r] = i < tq ? p.lse[bh * tq + i] * kLog2e : 0.0f;
    dl[r] = i < tq ? delta[bh * tq + i] : 0.0f;
  }

  float dq_acc[Tr::kOutTiles][4];
#pragma unroll
  for (int n = 0; n < Tr::kOutTiles; ++n)
#pragma unroll
    for (int c = 0; c < 4; ++c) dq_acc[n][c] = 0.0f;
  const float score_scale = p.scale * kLog2e;

  for (int step = 0; step < n_steps; ++step) {
    const int buf = step & 1;
    const int k0 = step * kBk;
    if (step + 1 < n_steps) {
      load_tile_bf16<kBk, Tr>(k_s + (buf ^ 1) * kTileElems, k_head, p.k_stride_t, k0 + kBk, key_len,
                              head_dim, tid);
      load_tile_bf16<kBk, Tr>(v_s + (buf ^ 1) * kTileElems, v_head, p.v_stride_t, k0 + kBk, key_len,
                              head_dim, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();  // all but the newest group: Q, dO and this key tile have landed
    __syncthreads();
    const bf16* kt = k_s + buf * kTileElems;
    const bf16* vt = v_s + buf * kTileElems;

    // pass 1: S = Q K^T, dP = dO V^T; [16 queries x kBk keys] per warp.
    float s1[1][Tr::kScoreTiles][4];
    float dp1[1][Tr::kScoreTiles][4];
    score_pair<Tr>(s1, dp1, q_s, kt, do_s, vt, q_row0, lane);
    float(&s)[Tr::kScoreTiles][4] = s1[0];
    float(&dp)[Tr::kScoreTiles][4] = dp1[0];

    // pass 2: dS in place of dP. s[n][c]: query q0 + q_row0 + acc_row, key
    // k0 + 8n + acc_col.
    const bool need_mask = k0 + kBk > key_len || (causal && k0 + kBk - 1 > q0);
#pragma unroll
    for (int n = 0; n < Tr::kScoreTiles; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = c / 2;
        bool visible = true;
        if (need_mask) {
          const int i = q0 + q_row0 + acc_row(lane, c);
          const int j = k0 + 8 * n + acc_col(lane, c);
          visible = j < key_len && !(causal && j > i);
        }
        const float prob = visible ? fast_exp2(s[n][c] * score_scale - lse2[r]) : 0.0f;
        dp[n][c] = prob * (dp[n][c] - dl[r]);
      }

    // pass 3: dQ += dS K. n8 tiles 2kk, 2kk + 1 of dS are the A fragment of
    // k16 step kk (keys k0 + 16kk ..); K as a [key][dim] tile gives the B
    // operand through ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < Tr::kStreamSteps; ++kk) {
      uint32_t ds_frag[4];
      acc_to_a(ds_frag, dp, kk);
#pragma unroll
      for (int dd = 0; dd < Tr::kOutTiles / 2; ++dd) {
        uint32_t k_frag[4];
        load_b_kn<kStride>(k_frag, kt, kk * 16, dd * 16, lane);
        mma_16816(dq_acc[2 * dd], ds_frag, k_frag[0], k_frag[1]);
        mma_16816(dq_acc[2 * dd + 1], ds_frag, k_frag[2], k_frag[3]);
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

  // Epilogue: rows q0 + q_row0 + g (+ 8) of dQ, times scale. Queries past
  // Tq are not written; rows with no visible key come out 0.
  store_rows(dq_acc, p.dq + b * p.dq_stride_b + h * p.dq_stride_h, p.dq_stride_t, q0 + q_row0,
             tq, head_dim, p.scale, lane);
#endif
}

bool aligned4(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 3u) == 0; }

template <auto kKernel, int kSmemBytes, bool kOptIn>
cudaError_t opt_in() {
  if constexpr (kOptIn)
    return cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  return cudaSuccess;
}

// The dK/dV kernel's tilings, per padded head dim (flash::BwdTiling: warps,
// m-tiles per warp, query rows a step, heads fastest when causal). Entry
// kDefaultTiling is the one flash_attention_backward_bf16 runs; entry 0 is
// the one it ran before, kept to be measured against it
// (flash_standalone_test --bench-tilings).
template <int kD>
struct BwdTilings;
// Measured on an H100 (flash_standalone_test --bench-tilings, B = H = 8,
// docs/bench/gpu_h100.md): at D = 64, two m-tiles per warp (each Q or dO
// fragment read from shared memory feeds two mmas) took the backward at
// T = 4096 from 4.56 to 3.12 ms; at D = 128, where two m-tiles' dK and dV
// would not fit in the registers, 8 warps of one m-tile and 64 queries a
// step (128 keys a block: half the dQ atomics) from 8.06 to 7.21 ms. Causal
// blocks placed with the heads fastest: 0.222 to 0.182 ms at T = 1024,
// D = 64. Tried there and not kept: float4 dQ atomics (no gain), 8 warps of
// two m-tiles at D = 64 (3.52 ms), 128 queries a step (spills: 4.26 ms).
template <>
struct BwdTilings<64> {
  using List = std::tuple<flash::BwdTiling<4, 1, 64>, flash::BwdTiling<4, 2, 32, true>>;
};
template <>
struct BwdTilings<128> {
  using List = std::tuple<flash::BwdTiling<4, 1, 32>, flash::BwdTiling<8, 1, 64, true>>;
};
constexpr int kTilingCount = std::tuple_size_v<BwdTilings<64>::List>;
constexpr int kDefaultTiling = 1;
static_assert(std::tuple_size_v<BwdTilings<128>::List> == kTilingCount, "one index names a tiling at every head dim");

template <int kD, class Tiling>
cudaError_t launch(const Params& p, const float* delta, float* dq_accum, cudaStream_t stream) {
  using Tr = Traits<kD, Tiling>;
  using TrQ = Traits<kD>;  // the dQ kernel's (deterministic mode)
  // The host pass reads the launch shape; every arch's traits must agree on it.
  using Sm80 = flash::FlashBwdMmaTraits<kD, 800, Tiling>;
  using Sm90 = flash::FlashBwdMmaTraits<kD, 900, Tiling>;
  static_assert(Sm80::kBlockRows == Sm90::kBlockRows && Sm80::kThreads == Sm90::kThreads &&
                Sm80::kSmemBytes == Sm90::kSmemBytes);
  static_assert(flash::FlashBwdMmaTraits<kD, 800>::kSmemBytes == flash::FlashBwdMmaTraits<kD, 900>::kSmemBytes);
  const int64_t bh = p.batch * p.heads;
  const int64_t n_kblocks = (p.k_len + Tr::kBlockRows - 1) / Tr::kBlockRows;
  const int64_t n_qblocks = (p.q_len + TrQ::kBlockRows - 1) / TrQ::kBlockRows;
  cudaError_t err = opt_in<flash_backward_dkdv_bf16_kernel<kD, Tiling>, Tr::kSmemBytes, Tr::kNeedsSmemOptIn>();
  if (err != cudaSuccess) return err;
  err = opt_in<flash_backward_dq_bf16_kernel<kD>, TrQ::kSmemBytes, TrQ::kNeedsSmemOptIn>();
  if (err != cudaSuccess) return err;
  if (n_kblocks > 0)
    flash_backward_dkdv_bf16_kernel<kD, Tiling><<<static_cast<unsigned>(bh * n_kblocks), Tr::kThreads,
                                                  Tr::kSmemBytes, stream>>>(p, delta, dq_accum,
                                                                            static_cast<int>(n_kblocks));
  err = cudaGetLastError();
  if (err != cudaSuccess || n_qblocks == 0) return err;
  if (dq_accum != nullptr) {
    const int64_t pairs = bh * p.q_len * (p.head_dim / 2);
    const int64_t blocks = (pairs + 255) / 256;
    flash_backward_dq_convert_bf16_kernel<<<static_cast<unsigned>(std::min<int64_t>(blocks, 65535 * 16)),
                                            256, 0, stream>>>(p, dq_accum);
    return cudaGetLastError();
  }
  flash_backward_dq_bf16_kernel<kD><<<static_cast<unsigned>(bh * n_qblocks), TrQ::kThreads,
                                      TrQ::kSmemBytes, stream>>>(p, delta,
                                                                 static_cast<int>(n_qblocks));
  return cudaGetLastError();
}

template <class Tiling>
std::string tiling_name() {
  return std::to_string(Tiling::kWarps) + " warps x " + std::to_string(Tiling::kMTiles) + " m-tiles, " +
         std::to_string(Tiling::kStreamRowsOr0) + " rows a step" +
         (Tiling::kHeadsFastest ? ", heads fastest when causal" : "");
}

}  // namespace

bool flash_attention_backward_bf16_supported(const Params& p) {
  constexpr int64_t kMaxLen = int64_t{1} << 30;
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
  const int64_t rows = Traits<64>::kBlockRows;  // the smallest block of any tiling
  const int64_t blocks = (std::max(p.q_len, p.k_len) + rows - 1) / rows;
  const auto pairs_ok = [](const bf16* ptr, int64_t sb, int64_t sh, int64_t st) {
    return ptr != nullptr && aligned4(ptr) && sb % 2 == 0 && sh % 2 == 0 && st % 2 == 0;
  };
  return bf16_mma_device() && p.head_dim >= 8 && p.head_dim <= kMaxHeadDim && p.head_dim % 8 == 0 &&
         p.o != nullptr && p.lse != nullptr && p.d_o != nullptr &&
         rows_16b(p.q, p.q_stride_b, p.q_stride_h, p.q_stride_t) &&
         rows_16b(p.k, p.k_stride_b, p.k_stride_h, p.k_stride_t) &&
         rows_16b(p.v, p.v_stride_b, p.v_stride_h, p.v_stride_t) &&
         rows_16b(p.d_o, p.do_stride_b, p.do_stride_h, p.do_stride_t) &&
         pairs_ok(p.dq, p.dq_stride_b, p.dq_stride_h, p.dq_stride_t) &&
         pairs_ok(p.dk, p.dk_stride_b, p.dk_stride_h, p.dk_stride_t) &&
         pairs_ok(p.dv, p.dv_stride_b, p.dv_stride_h, p.dv_stride_t) && p.q_len < kMaxLen &&
         p.k_len < kMaxLen && p.batch * p.heads * blocks <= kMaxGridX;
}

int flash_attention_backward_bf16_tilings() { return kTilingCount; }

std::string flash_attention_backward_bf16_tiling_name(int head_dim, int tiling) {
  return flash::tiling_label<BwdTilings>(head_dim, tiling, kDefaultTiling,
                                     [](auto tag) { return tiling_name<typename decltype(tag)::type>(); });
}

int flash_attention_backward_bf16(const Params& p, float* delta_scratch, float* dq_scratch,
                                  cudaStream_t stream) {
  return flash_attention_backward_bf16_tiling(p, delta_scratch, dq_scratch, stream, kDefaultTiling);
}

int flash_attention_backward_bf16_tiling(const Params& p, float* delta_scratch, float* dq_scratch,
                                         cudaStream_t stream, int tiling) {
  const int64_t bh = p.batch * p.heads;
  if (bh == 0) return 0;
  if (delta_scratch == nullptr || !flash_attention_backward_bf16_supported(p) || tiling < 0 ||
      tiling >= kTilingCount)
    return static_cast<int>(cudaErrorInvalidValue);
  const int64_t rows = bh * p.q_len;
  if (rows > 0) {
    const int64_t blocks = (rows + kDeltaWarps - 1) / kDeltaWarps;
    const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
    flash_backward_delta_bf16_kernel<<<grid, kDeltaWarps * 32, 0, stream>>>(p, delta_scratch);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return static_cast<int>(err);
  }
  if (dq_scratch != nullptr && rows > 0) {
    const cudaError_t err =
        cudaMemsetAsync(dq_scratch, 0, static_cast<size_t>(rows * p.head_dim) * sizeof(float), stream);
    if (err != cudaSuccess) return static_cast<int>(err);
  }
  // Tq = 0 leaves dK and dV to be zero: the dK/dV kernel sees no query tile.
  cudaError_t err = cudaSuccess;
  flash::with_tiling<BwdTilings>(static_cast<int>(p.head_dim), tiling, [&](auto d, auto tag) {
    err = launch<decltype(d)::value, typename decltype(tag)::type>(p, delta_scratch, dq_scratch, stream);
  });
  return static_cast<int>(err);
}

}  // namespace nmt::ops::cuda
