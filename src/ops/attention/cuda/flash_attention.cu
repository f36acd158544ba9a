// FlashAttention-2 in float32 on CUDA (CUDA cores, no tensor cores).
//
// Forward: one thread block per (b, h, query block of kBr rows). The Q tile
// stays in shared memory; K/V tiles of kBc keys stream through shared memory
// with cp.async (the next K tile loads while P V runs, the next V tile while
// Q K^T runs). Each thread owns a kTm x kTn patch of the score tile and a
// kTm x kD/8 patch of O in registers; the running max / sum live in
// registers; only O and the logsumexp are written. The softmax works in
// base 2: scores are prescaled by scale * log2(e) so each exponential is one
// exp2f.
//
// Backward: (1) a prep kernel computes delta = rowsum(dO * O) and zeroes the
// dQ accumulator; (2) one thread block per (b, h, key block of kBc keys)
// keeps K_j, V_j in shared memory and dK_j, dV_j in registers, loops over the
// query blocks, recomputes P = exp(scale * Q_i K_j^T - lse_i) from the saved
// logsumexp, and adds its dQ_i contribution into the float32 accumulator with
// atomics (float4 atomics on sm_90); (3) if the accumulator is a separate
// buffer it is copied into dq (cudaMemcpyAsync). If dq_accum is null, dq
// itself is zeroed and accumulated into, which skips step (3).
//
// Structure: tile sizes, threads, register patches and the shared-memory
// layout come from FlashFwdTraits / FlashBwdTraits (flash_kernel_traits.h),
// one instantiation per (padded head dim, float, arch). Every matrix product
// below is one of three tile primitives (flash_tile.cuh): mma_abt (S = Q K^T,
// dP = dO V^T), mma_ab (O += P V, dQ += dS K) and mma_atb_x2 (dV += P^T dO
// with dK += dS^T Q). The kernels add what is attention-specific: masking,
// the online softmax, the gradient algebra and the pipelining of the copies.
//
// Masking (see attention_params.h): key blocks entirely above the causal
// diagonal or entirely past key_lengths[b] are never visited; blocks that
// straddle a boundary are masked element-wise; all other blocks run without
// per-element checks. Rows that see no key end with o = 0, lse = -inf and
// zero gradients.
//
// Head dims: kernels are templated on a padded head dim kD in
// {32, 64, 128, 192, 256}. D = 32 / 64 / 128 are the fast paths; any other
// D <= 256 runs the next larger instantiation with the extra columns zero-
// filled in shared memory (zeros change no dot product and are never stored).
// Inputs whose rows are 16-byte aligned (D % 4 == 0, strides % 4 == 0,
// aligned base pointers) are copied with 16-byte cp.async; anything else
// falls back to element-wise loads (same kernels, slower copies).
//
// Shared memory: 72 to 108 KB per block (D = 64: 104 KB forward and
// backward), all of it dynamic and above the 48 KB default, so every launch
// first opts in with cudaFuncSetAttribute. The traits static_assert that each
// layout fits the per-block opt-in limit of sm_80 (163 KB) and sm_90
// (227 KB); on GPUs with a 99 KB per-block limit (sm_86 / sm_89) the D = 64
// and D > 128 paths return the cudaFuncSetAttribute error from the entry point.
#include "ops/attention/cuda/attention_cuda.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "ops/attention/cuda/flash_kernel_traits.h"
#include "ops/attention/cuda/flash_tile.cuh"

namespace nmt::ops::cuda {
namespace {

using flash::cp_async_commit;
using flash::cp_async_wait;
using flash::load_tile;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kMaxHeadDim = 256;
constexpr int kWarpSize = 32;

// The shapes of this compilation pass (see flash::kTargetArch).
template <int kD>
using FwdTraits = flash::FlashFwdTraits<kD, float, flash::kTargetArch>;
template <int kD>
using BwdTraits = flash::FlashBwdTraits<kD, float, flash::kTargetArch>;

// ---------------------------------------------------------------------------
// Small device helpers.
// ---------------------------------------------------------------------------

// Sum / max over the kColGroups adjacent lanes that share a row group.
template <class Tr>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int offset = 1; offset < Tr::kColGroups; offset *= 2)
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
template <class Tr>
__device__ __forceinline__ float group_max(float x) {
#pragma unroll
  for (int offset = 1; offset < Tr::kColGroups; offset *= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// Writes 4 consecutive floats of a contiguous row (columns d .. d+3),
// dropping columns >= head_dim.
__device__ __forceinline__ void store4(float* row, int d, int head_dim, const float (&x)[4],
                                       bool vec_ok) {
  if (vec_ok) {  // head_dim % 4 == 0, so the chunk is all in or all out
    if (d < head_dim) *reinterpret_cast<float4*>(row + d) = make_float4(x[0], x[1], x[2], x[3]);
  } else {
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (d + c < head_dim) row[d + c] = x[c];
  }
}

// ---------------------------------------------------------------------------
// Forward.
// grid.x = B * H * n_qblocks (query block fastest, so blocks resident at the
// same time share one head's K/V in L2); block = Tr::kThreads.
// Long, on purpose: the passes below share the accumulators and row
// statistics held in registers from the first key tile to the epilogue; as
// separate functions they would pass them all by reference and read out of
// order. Each pass is narrated where it starts.
// ---------------------------------------------------------------------------
template <int kD>
__global__ void __launch_bounds__(FwdTraits<kD>::kThreads, FwdTraits<kD>::kMinBlocksPerSm)
    flash_forward_kernel(const AttentionForwardParams<float> p, int n_qblocks, bool vec_ok) {
  using Tr = FwdTraits<kD>;
  constexpr int kBr = Tr::kBr;
  constexpr int kBc = Tr::kBc;
  constexpr int kTm = Tr::kTm;  // query rows per thread: Tr::row_of(rg, t)
  constexpr int kTn = Tr::kTn;  // key columns per thread: Tr::key_of(cg, u)
  constexpr int kTd = Tr::kTd;  // O column vectors per thread: Tr::dcol_of(cg, e) + [0, 4)
  constexpr int kPStride = Tr::kPStride;

  extern __shared__ float4 smem_f4[];
  float* smem = reinterpret_cast<float*>(smem_f4);
  float* q_s = smem + Tr::kSmemQ;  // q_s: [kBr][kStride]
  float* k_s = smem + Tr::kSmemK;  // k_s: [kBc][kStride]
  float* v_s = smem + Tr::kSmemV;  // v_s: [kBc][kStride]
  float* p_s = smem + Tr::kSmemP;  // p_s: [kBr][kPStride]

  const flash::BlockPlace at = flash::block_place(p, n_qblocks, /*longest_first=*/p.causal);
  const int64_t bh = at.bh, b = at.b, h = at.h;
  const int tq = static_cast<int>(p.q_len);
  const int head_dim = static_cast<int>(p.head_dim);
  const bool causal = p.causal;
  const int q0 = at.block * kBr;

  // This head's q: [Tq, D], k / v: [Tk, D]; row strides p.{q,k,v}_stride_t.
  const float* q_head = p.q + b * p.q_stride_b + h * p.q_stride_h;
  const float* k_head = p.k + b * p.k_stride_b + h * p.k_stride_h;
  const float* v_head = p.v + b * p.v_stride_b + h * p.v_stride_h;

  const int key_len = flash::key_length(p, b);
  const int n_kblocks = (flash::visible_keys(key_len, causal, q0, kBr, tq) + kBc - 1) / kBc;

  const int tid = threadIdx.x;
  const int rg = tid / Tr::kColGroups;  // row group
  const int cg = tid % Tr::kColGroups;  // column group

  // Prologue: group 0 = {Q, K_0}, group 1 = {V_0}.
  load_tile<kBr, Tr>(q_s, q_head, p.q_stride_t, q0, tq, head_dim, vec_ok, tid);
  if (n_kblocks > 0)
    load_tile<kBc, Tr>(k_s, k_head, p.k_stride_t, 0, key_len, head_dim, vec_ok, tid);
  cp_async_commit();
  if (n_kblocks > 0)
    load_tile<kBc, Tr>(v_s, v_head, p.v_stride_t, 0, key_len, head_dim, vec_ok, tid);
  cp_async_commit();

  float o_acc[kTm][kTd][4];
  float row_max[kTm];  // running max of the log2-scaled scores
  float row_sum[kTm];  // this thread's share of the running sum (reduced at the end)
#pragma unroll
  for (int t = 0; t < kTm; ++t) {
    row_max[t] = -INFINITY;
    row_sum[t] = 0.0f;
    flash::zero(o_acc[t]);
  }
  const float score_scale = p.scale * kLog2e;

  for (int kb = 0; kb < n_kblocks; ++kb) {
    const int k0 = kb * kBc;
    // K_kb (and Q) have landed; V_kb may still be in flight. The barrier also
    // orders the previous iteration's reads of p_s before the writes below.
    cp_async_wait<1>();
    __syncthreads();

    // pass 1: scores S = Q K^T for this thread's kTm x kTn patch.
    float s[kTm][kTn];
    flash::zero(s);
    flash::mma_abt<Tr, Tr::kUnrollQK>(s, q_s, k_s, rg, cg);

    // pass 2: mask + online softmax. Only blocks straddling the causal
    // diagonal or the key length need the per-element test.
    const bool need_mask = k0 + kBc > key_len || (causal && k0 + kBc - 1 > q0);
#pragma unroll
    for (int t = 0; t < kTm; ++t) {
      const int i = q0 + Tr::row_of(rg, t);
      float tile_max = -INFINITY;
#pragma unroll
      for (int u = 0; u < kTn; ++u) {
        float x = s[t][u] * score_scale;
        if (need_mask) {
          const int j = k0 + Tr::key_of(cg, u);
          if (j >= key_len || (causal && j > i)) x = -INFINITY;
        }
        s[t][u] = x;
        tile_max = fmaxf(tile_max, x);
      }
      const float new_max = fmaxf(row_max[t], group_max<Tr>(tile_max));
      // A row with nothing visible yet keeps max = -inf; subtracting 0 instead
      // of -inf keeps exp2 at exp2(-inf) = 0 rather than NaN.
      const float ref = new_max == -INFINITY ? 0.0f : new_max;
      const float correction = exp2f(row_max[t] - ref);  // 0 on the first visible block
      row_max[t] = new_max;
      float tile_sum = 0.0f;
#pragma unroll
      for (int u = 0; u < kTn; ++u) {
        s[t][u] = exp2f(s[t][u] - ref);
        tile_sum += s[t][u];
      }
      row_sum[t] = row_sum[t] * correction + tile_sum;
#pragma unroll
      for (int e = 0; e < kTd; ++e)
#pragma unroll
        for (int c = 0; c < 4; ++c) o_acc[t][e][c] *= correction;
      // P goes through shared memory: P V needs whole rows of P, which are
      // spread over the kColGroups lanes of the row group.
#pragma unroll
      for (int u = 0; u < kTn; ++u) p_s[Tr::row_of(rg, t) * kPStride + Tr::key_of(cg, u)] = s[t][u];
    }

    // V_kb has landed, P is complete, and every thread is done with k_s:
    // start loading K_{kb+1} so it overlaps with P V.
    cp_async_wait<0>();
    __syncthreads();
    if (kb + 1 < n_kblocks)
      load_tile<kBc, Tr>(k_s, k_head, p.k_stride_t, k0 + kBc, key_len, head_dim, vec_ok, tid);
    cp_async_commit();

    // pass 3: O += P V for this thread's kTm x (4 * kTd) patch.
    flash::mma_ab<Tr, Tr::kUnrollPV>(o_acc, p_s, v_s, rg, cg);

    // Every thread is done with v_s and p_s: start loading V_{kb+1} so it
    // overlaps with the next Q K^T.
    __syncthreads();
    if (kb + 1 < n_kblocks)
      load_tile<kBc, Tr>(v_s, v_head, p.v_stride_t, k0 + kBc, key_len, head_dim, vec_ok, tid);
    cp_async_commit();
  }
  cp_async_wait<0>();  // nothing may be left in flight when the block exits

  // Epilogue: normalize and write O and the logsumexp (natural log).
  // o: [B, H, Tq, D] contiguous; lse: [B, H, Tq] contiguous.
#pragma unroll
  for (int t = 0; t < kTm; ++t) {
    const int i = q0 + Tr::row_of(rg, t);
    const float total = group_sum<Tr>(row_sum[t]);
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;  // empty row -> o = 0
    if (i < tq) {
      float* o_row = p.o + (bh * tq + i) * head_dim;
#pragma unroll
      for (int e = 0; e < kTd; ++e) {
        const float out[4] = {o_acc[t][e][0] * inv, o_acc[t][e][1] * inv, o_acc[t][e][2] * inv,
                              o_acc[t][e][3] * inv};
        store4(o_row, Tr::dcol_of(cg, e), head_dim, out, vec_ok);
      }
      if (p.lse != nullptr && cg == 0)
        p.lse[bh * tq + i] = total > 0.0f ? (row_max[t] + log2f(total)) * kLn2 : -INFINITY;
    }
  }
}

// ---------------------------------------------------------------------------
// Backward prep: delta[r] = sum_d dO[r, d] * O[r, d] and accum[r, :] = 0.
// o, d_o, accum: [rows, D] contiguous; delta: [rows]. One warp per row.
// ---------------------------------------------------------------------------
constexpr int kPrepWarps = 8;

__global__ void flash_backward_prep_kernel(const float* o, const float* d_o, float* delta,
                                           float* accum, int64_t rows, int head_dim) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kPrepWarps + threadIdx.x / kWarpSize;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kPrepWarps;
  for (int64_t r = warp; r < rows; r += step) {
    const float* o_row = o + r * head_dim;
    const float* do_row = d_o + r * head_dim;
    float* acc_row = accum + r * head_dim;
    float sum = 0.0f;
    for (int d = lane; d < head_dim; d += kWarpSize) {
      sum = fmaf(o_row[d], do_row[d], sum);
      acc_row[d] = 0.0f;
    }
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) delta[r] = sum;
  }
}

// ---------------------------------------------------------------------------
// Backward main kernel.
// grid.x = B * H * n_kblocks; block = Tr::kThreads (= 128).
// Thread patches: S / dP and the dQ partial use query rows Tr::row_of(rg, t)
// (as in the forward); dK / dV use key rows Tr::key_row_of(rg, r) and
// head-dim columns Tr::dcol_of(cg, e).
// Long, on purpose: the passes below share the accumulators and row
// statistics held in registers from the first key tile to the epilogue; as
// separate functions they would pass them all by reference and read out of
// order. Each pass is narrated where it starts.
// ---------------------------------------------------------------------------
template <int kD>
__global__ void __launch_bounds__(BwdTraits<kD>::kThreads, BwdTraits<kD>::kMinBlocksPerSm)
    flash_backward_kernel(const AttentionBackwardParams<float> p, const float* delta,
                          float* dq_accum, int n_kblocks, bool vec_ok, bool vec_atomic) {
  using Tr = BwdTraits<kD>;
  constexpr int kBr = Tr::kBr;
  constexpr int kBc = Tr::kBc;
  constexpr int kTm = Tr::kTm;  // query rows per thread (S, dP, dQ)
  constexpr int kTn = Tr::kTn;  // key columns per thread (S, dP)
  constexpr int kJn = Tr::kJn;  // key rows per thread (dK, dV)
  constexpr int kTd = Tr::kTd;  // head-dim vectors of 4 per thread
  constexpr int kPStride = Tr::kPStride;

  extern __shared__ float4 smem_f4[];
  float* smem = reinterpret_cast<float*>(smem_f4);
  float* q_s = smem + Tr::kSmemQ;    // q_s: [kBr][kStride]
  float* do_s = smem + Tr::kSmemDO;  // do_s: [kBr][kStride]
  float* k_s = smem + Tr::kSmemK;    // k_s: [kBc][kStride]
  float* v_s = smem + Tr::kSmemV;    // v_s: [kBc][kStride]
  float* p_s = smem + Tr::kSmemP;    // p_s: [kBr][kPStride]
  float* ds_s = smem + Tr::kSmemDS;  // ds_s: [kBr][kPStride], scale * dS

  // Low kb = most queries: first.
  const flash::BlockPlace at = flash::block_place(p, n_kblocks, /*longest_first=*/false);
  const int64_t bh = at.bh, b = at.b, h = at.h;
  const int tq = static_cast<int>(p.q_len);
  const int tk = static_cast<int>(p.k_len);
  const int head_dim = static_cast<int>(p.head_dim);
  const bool causal = p.causal;
  const int k0 = at.block * kBc;

  // This head's q: [Tq, D], k / v: [Tk, D]; row strides p.{q,k,v}_stride_t.
  const float* q_head = p.q + b * p.q_stride_b + h * p.q_stride_h;
  const float* k_head = p.k + b * p.k_stride_b + h * p.k_stride_h;
  const float* v_head = p.v + b * p.v_stride_b + h * p.v_stride_h;
  const float* do_head = p.d_o + bh * tq * head_dim;  // [Tq, D] contiguous
  const float* lse_head = p.lse + bh * tq;            // [Tq]
  const float* delta_head = delta + bh * tq;          // [Tq]
  float* dq_head = dq_accum + bh * tq * head_dim;     // [Tq, D] contiguous

  const int key_len = flash::key_length(p, b);

  const int tid = threadIdx.x;
  const int rg = tid / Tr::kColGroups;
  const int cg = tid % Tr::kColGroups;

  float dk_acc[kJn][kTd][4];
  float dv_acc[kJn][kTd][4];
#pragma unroll
  for (int r = 0; r < kJn; ++r) {
    flash::zero(dv_acc[r]);
    flash::zero(dk_acc[r]);
  }

  // Query blocks that can see this key block. Under causal masking query i
  // sees key k0 only if i >= k0, so start at the block holding row k0. A key
  // block entirely past key_len is seen by nobody: dK = dV = 0.
  const int n_qblocks = (tq + kBr - 1) / kBr;
  const int qb_begin = causal ? k0 / kBr : 0;
  const bool has_work = k0 < key_len && qb_begin < n_qblocks;
  const float score_scale = p.scale * kLog2e;

  if (has_work) {
    load_tile<kBc, Tr>(k_s, k_head, p.k_stride_t, k0, key_len, head_dim, vec_ok, tid);
    load_tile<kBc, Tr>(v_s, v_head, p.v_stride_t, k0, key_len, head_dim, vec_ok, tid);
    load_tile<kBr, Tr>(q_s, q_head, p.q_stride_t, qb_begin * kBr, tq, head_dim, vec_ok, tid);
    load_tile<kBr, Tr>(do_s, do_head, head_dim, qb_begin * kBr, tq, head_dim, vec_ok, tid);
    cp_async_commit();

    for (int qb = qb_begin; qb < n_qblocks; ++qb) {
      const int q0 = qb * kBr;
      // Per-row softmax statistics, log2 units. A row past Tq or with no
      // visible key (lse = -inf) gets +inf, so exp2(x - inf) = 0 makes its P
      // (and hence dS) exactly 0 without a branch per element.
      float lse2[kTm];
      float row_delta[kTm];
#pragma unroll
      for (int t = 0; t < kTm; ++t) {
        const int i = q0 + Tr::row_of(rg, t);
        lse2[t] = INFINITY;
        row_delta[t] = 0.0f;
        if (i < tq) {
          const float lse = lse_head[i];
          if (lse != -INFINITY) lse2[t] = lse * kLog2e;
          row_delta[t] = delta_head[i];
        }
      }

      // Q_qb, dO_qb (and on the first pass K, V) have landed; the barrier also
      // orders the previous pass-5 reads of ds_s before the writes below.
      cp_async_wait<0>();
      __syncthreads();

      // pass 1: P = exp2(scale * log2(e) * Q K^T - lse2), masked -> 0.
      float pr[kTm][kTn];
      flash::zero(pr);
      flash::mma_abt<Tr, Tr::kUnrollQK>(pr, q_s, k_s, rg, cg);
      const bool need_mask = k0 + kBc > key_len || (causal && k0 + kBc - 1 > q0);
#pragma unroll
      for (int t = 0; t < kTm; ++t) {
        const int i = q0 + Tr::row_of(rg, t);
#pragma unroll
        for (int u = 0; u < kTn; ++u) {
          float prob = exp2f(fmaf(pr[t][u], score_scale, -lse2[t]));
          if (need_mask) {
            const int j = k0 + Tr::key_of(cg, u);
            if (j >= key_len || (causal && j > i)) prob = 0.0f;
          }
          pr[t][u] = prob;
        }
      }

      // pass 2: dP = dO V^T (same patch as P).
      float dp[kTm][kTn];
      flash::zero(dp);
      flash::mma_abt<Tr, Tr::kUnrollQK>(dp, do_s, v_s, rg, cg);

      // pass 3: dS = P * (dP - delta), scaled by `scale` once here so dQ and
      // dK need no extra multiply. Stage P and scale * dS in shared memory:
      // passes 4 and 5 read them by key row and by query row, which other
      // threads own.
#pragma unroll
      for (int t = 0; t < kTm; ++t) {
        const int row = Tr::row_of(rg, t) * kPStride;
#pragma unroll
        for (int u = 0; u < kTn; ++u) {
          const int col = Tr::key_of(cg, u);
          p_s[row + col] = pr[t][u];
          ds_s[row + col] = pr[t][u] * (dp[t][u] - row_delta[t]) * p.scale;
        }
      }
      __syncthreads();

      // pass 4: dV += P^T dO and dK += (scale * dS)^T Q over this query block.
      flash::mma_atb_x2<Tr, Tr::kUnrollDKDV>(dv_acc, p_s, do_s, dk_acc, ds_s, q_s, rg, cg);

      // Every thread is done with q_s / do_s: prefetch the next query block
      // so the copy overlaps with pass 5 and its atomics.
      __syncthreads();
      if (qb + 1 < n_qblocks) {
        load_tile<kBr, Tr>(q_s, q_head, p.q_stride_t, q0 + kBr, tq, head_dim, vec_ok, tid);
        load_tile<kBr, Tr>(do_s, do_head, head_dim, q0 + kBr, tq, head_dim, vec_ok, tid);
      }
      cp_async_commit();

      // pass 5: dQ_qb += (scale * dS) K, accumulated across key blocks with
      // float32 atomics (fire-and-forget reductions: the result is unused).
      float dq_part[kTm][kTd][4];
      flash::zero(dq_part);
      flash::mma_ab<Tr, Tr::kUnrollDQ>(dq_part, ds_s, k_s, rg, cg);
#pragma unroll
      for (int t = 0; t < kTm; ++t) {
        const int i = q0 + Tr::row_of(rg, t);
        if (i >= tq) continue;
        float* dq_row = dq_head + static_cast<int64_t>(i) * head_dim;
#pragma unroll
        for (int e = 0; e < kTd; ++e) {
          const int d = Tr::dcol_of(cg, e);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
          if (vec_atomic) {  // one 16-byte reduction instead of four
            if (d < head_dim)
              atomicAdd(reinterpret_cast<float4*>(dq_row + d),
                        make_float4(dq_part[t][e][0], dq_part[t][e][1], dq_part[t][e][2],
                                    dq_part[t][e][3]));
            continue;
          }
#endif
#pragma unroll
          for (int c = 0; c < 4; ++c)
            if (d + c < head_dim) atomicAdd(dq_row + d + c, dq_part[t][e][c]);
        }
      }
    }
    cp_async_wait<0>();  // nothing may be left in flight when the block exits
  }

  // Write dK, dV for the keys of this block (zeros when nobody sees them).
  // dk, dv: [B, H, Tk, D] contiguous.
#pragma unroll
  for (int r = 0; r < kJn; ++r) {
    const int j = k0 + Tr::key_row_of(rg, r);
    if (j >= tk) continue;
    float* dk_row = p.dk + (bh * tk + j) * head_dim;
    float* dv_row = p.dv + (bh * tk + j) * head_dim;
#pragma unroll
    for (int e = 0; e < kTd; ++e) {
      store4(dk_row, Tr::dcol_of(cg, e), head_dim, dk_acc[r][e], vec_ok);
      store4(dv_row, Tr::dcol_of(cg, e), head_dim, dv_acc[r][e], vec_ok);
    }
  }
  (void)vec_atomic;
}

// ---------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// 16-byte copies need every row start to be 16-byte aligned.
template <typename Params>
bool rows_vectorizable(const Params& p) {
  return p.head_dim % 4 == 0 && aligned16(p.q) && aligned16(p.k) && aligned16(p.v) &&
         p.q_stride_b % 4 == 0 && p.q_stride_h % 4 == 0 && p.q_stride_t % 4 == 0 &&
         p.k_stride_b % 4 == 0 && p.k_stride_h % 4 == 0 && p.k_stride_t % 4 == 0 &&
         p.v_stride_b % 4 == 0 && p.v_stride_h % 4 == 0 && p.v_stride_t % 4 == 0;
}

// Sizes are kept in int inside the kernels; grids are 1-D.
bool shape_supported(int64_t bh_count, int64_t tq, int64_t tk, int64_t head_dim,
                     int64_t blocks_per_head) {
  constexpr int64_t kMaxLen = (int64_t{1} << 30);
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
  return head_dim >= 1 && head_dim <= kMaxHeadDim && tq < kMaxLen && tk < kMaxLen &&
         bh_count * blocks_per_head <= kMaxGridX;
}

// The host reads the launch shape (tile sizes, threads, shared memory) from
// the traits of its own compilation pass, which cannot know which GPU will
// run the kernel; every arch's traits must therefore agree on it. Naming the
// sm_80 and sm_90 traits here also runs their shared-memory static_asserts
// in the host pass.
template <template <int, typename, int> class Traits, int kD>
constexpr bool launch_shape_arch_independent() {
  using Sm80 = Traits<kD, float, 800>;
  using Sm90 = Traits<kD, float, 900>;
  return Sm80::kBr == Sm90::kBr && Sm80::kBc == Sm90::kBc &&
         Sm80::kThreads == Sm90::kThreads && Sm80::kSmemBytes == Sm90::kSmemBytes;
}

int padded_head_dim(int64_t head_dim) {
  if (head_dim <= 32) return 32;
  if (head_dim <= 64) return 64;
  if (head_dim <= 128) return 128;
  if (head_dim <= 192) return 192;
  return 256;
}

template <int kD>
cudaError_t launch_forward(const AttentionForwardParams<float>& p, cudaStream_t stream) {
  using Tr = FwdTraits<kD>;
  static_assert(launch_shape_arch_independent<flash::FlashFwdTraits, kD>());
  const int64_t bh_count = p.batch * p.heads;
  const int64_t n_qblocks = (p.q_len + Tr::kBr - 1) / Tr::kBr;
  if (!shape_supported(bh_count, p.q_len, p.k_len, p.head_dim, n_qblocks))
    return cudaErrorInvalidValue;
  const bool vec_ok = rows_vectorizable(p) && aligned16(p.o);
  constexpr int kSmemBytes = Tr::kSmemBytes;
  // Above 48 KB, dynamic shared memory must be opted into (per kernel); all
  // instantiations are (72 to 104 KB). On a GPU whose per-block limit is
  // smaller (sm_86 / sm_89: 99 KB) this is the call that fails.
  if constexpr (Tr::kNeedsSmemOptIn) {
    const cudaError_t err = cudaFuncSetAttribute(
        flash_forward_kernel<kD>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (err != cudaSuccess) return err;
  }
  flash_forward_kernel<kD>
      <<<static_cast<unsigned>(bh_count * n_qblocks), Tr::kThreads, kSmemBytes, stream>>>(
          p, static_cast<int>(n_qblocks), vec_ok);
  return cudaGetLastError();
}

template <int kD>
cudaError_t launch_backward(const AttentionBackwardParams<float>& p, const float* delta,
                            float* accum, cudaStream_t stream) {
  using Tr = BwdTraits<kD>;
  static_assert(launch_shape_arch_independent<flash::FlashBwdTraits, kD>());
  const int64_t bh_count = p.batch * p.heads;
  const int64_t n_kblocks = (p.k_len + Tr::kBc - 1) / Tr::kBc;
  if (!shape_supported(bh_count, p.q_len, p.k_len, p.head_dim, n_kblocks))
    return cudaErrorInvalidValue;
  if (n_kblocks == 0) return cudaSuccess;  // Tk = 0: no dK / dV rows, dQ stays 0
  const bool vec_ok =
      rows_vectorizable(p) && aligned16(p.d_o) && aligned16(p.dk) && aligned16(p.dv);
  const bool vec_atomic = p.head_dim % 4 == 0 && aligned16(accum);
  constexpr int kSmemBytes = Tr::kSmemBytes;  // 72 to 108 KB: opted into as in the forward
  if constexpr (Tr::kNeedsSmemOptIn) {
    const cudaError_t err = cudaFuncSetAttribute(
        flash_backward_kernel<kD>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (err != cudaSuccess) return err;
  }
  flash_backward_kernel<kD>
      <<<static_cast<unsigned>(bh_count * n_kblocks), Tr::kThreads, kSmemBytes, stream>>>(
          p, delta, accum, static_cast<int>(n_kblocks), vec_ok, vec_atomic);
  return cudaGetLastError();
}

}  // namespace

int flash_attention_forward(const AttentionForwardParams<float>& p, cudaStream_t stream) {
  if (p.batch * p.heads == 0 || p.q_len == 0) return 0;
  if (p.o == nullptr || p.head_dim < 1 || p.head_dim > kMaxHeadDim)
    return static_cast<int>(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  switch (padded_head_dim(p.head_dim)) {
    case 32:
      err = launch_forward<32>(p, stream);
      break;
    case 64:
      err = launch_forward<64>(p, stream);
      break;
    case 128:
      err = launch_forward<128>(p, stream);
      break;
    case 192:
      err = launch_forward<192>(p, stream);
      break;
    default:
      err = launch_forward<256>(p, stream);
      break;
  }
  return static_cast<int>(err);
}

int flash_attention_backward(const AttentionBackwardParams<float>& p, float* delta_scratch,
                             float* dq_accum, cudaStream_t stream) {
  const int64_t bh_count = p.batch * p.heads;
  if (bh_count == 0) return 0;
  if (p.head_dim < 1 || p.head_dim > kMaxHeadDim || delta_scratch == nullptr || p.lse == nullptr ||
      p.o == nullptr)
    return static_cast<int>(cudaErrorInvalidValue);
  const int64_t rows = bh_count * p.q_len;
  // dQ is accumulated by atomics, into dq_accum if given, else into dq itself.
  float* accum = dq_accum != nullptr ? dq_accum : p.dq;

  // step 1: delta = rowsum(dO * O), accum = 0.
  if (rows > 0) {
    const int64_t blocks = (rows + kPrepWarps - 1) / kPrepWarps;
    const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
    flash_backward_prep_kernel<<<grid, kPrepWarps * kWarpSize, 0, stream>>>(
        p.o, p.d_o, delta_scratch, accum, rows, static_cast<int>(p.head_dim));
  }

  // step 2: dK, dV per key block; dQ by atomics.
  cudaError_t err = cudaSuccess;
  switch (padded_head_dim(p.head_dim)) {
    case 32:
      err = launch_backward<32>(p, delta_scratch, accum, stream);
      break;
    case 64:
      err = launch_backward<64>(p, delta_scratch, accum, stream);
      break;
    case 128:
      err = launch_backward<128>(p, delta_scratch, accum, stream);
      break;
    case 192:
      err = launch_backward<192>(p, delta_scratch, accum, stream);
      break;
    default:
      err = launch_backward<256>(p, delta_scratch, accum, stream);
      break;
  }
  if (err != cudaSuccess) return static_cast<int>(err);

  // step 3: the accumulator is already float32, so "converting" is a copy.
  if (accum != p.dq && rows > 0) {
    err = cudaMemcpyAsync(p.dq, accum, static_cast<size_t>(rows * p.head_dim) * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream);
    if (err != cudaSuccess) return static_cast<int>(err);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nmt::ops::cuda
