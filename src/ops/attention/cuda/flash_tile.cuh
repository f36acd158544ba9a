// The register-tile primitives of the CUDA flash kernels: the cooperative
// global -> shared tile copy and the three per-thread tile multiplies every
// pass of the forward and backward is made of. Shapes, strides and the
// thread -> element map come from the traits (flash_kernel_traits.h); the
// kernels call these and nothing here knows about softmax or masking.
//
// Everything is __host__ __device__ and takes the thread's index as an
// argument instead of reading threadIdx, so tests/cuda/flash_tile_emulation_test.cu
// runs these very functions on the CPU, one emulated thread after another, and
// compares them with a float64 matrix multiply. On the host, cp.async becomes
// a plain 16-byte copy (the same fallback pre-sm_80 devices take).
//
// float32 only (float4 vectors, FMA on CUDA cores); a bf16 variant brings its
// own multiply (tensor-core mma) under the same traits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/attention/cuda/flash_kernel_traits.h"

// #pragma unroll for the device passes only: these functions are also
// compiled for the host, whose compiler does not know the pragma.
#if defined(__CUDA_ARCH__)
#define NMT_FLASH_PRAGMA(x) _Pragma(#x)
#define NMT_FLASH_UNROLL NMT_FLASH_PRAGMA(unroll)
#define NMT_FLASH_UNROLL_N(n) NMT_FLASH_PRAGMA(unroll(n))
#else
#define NMT_FLASH_UNROLL
#define NMT_FLASH_UNROLL_N(n)
#endif

namespace nmt::ops::cuda::flash {

// ---------------------------------------------------------------------------
// Asynchronous copies.
// ---------------------------------------------------------------------------

// 16-byte global -> shared copy that bypasses registers. src_bytes = 0 zero-
// fills the destination without reading (used for out-of-range rows/columns).
// Untyped: the float32 and the bf16 kernels copy 16 bytes alike.
NMT_FLASH_HD void cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  const size_t src = __cvta_generic_to_global(gmem_src);
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
#else
  *reinterpret_cast<float4*>(smem_dst) =
      valid ? *reinterpret_cast<const float4*>(gmem_src) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

NMT_FLASH_HD void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of this thread's committed groups are still
// in flight. A __syncthreads() must follow before reading other threads' data.
template <int kPending>
NMT_FLASH_HD void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Thread tid's share of copying rows [row0, row0 + kRows) of one head's
// [T, D] matrix (row stride stride_t, D contiguous) into the shared tile
// tile: [kRows][Tr::kStride]. Rows >= row_limit and columns >= head_dim are
// zero-filled: zeros add nothing to dot products and keep 0 * garbage = NaN
// out of P V. vec_ok: rows are 16-byte aligned, so 16-byte cp.async is legal.
template <int kRows, class Tr>
NMT_FLASH_HD void load_tile(float* tile, const float* src, int64_t stride_t, int row0,
                            int row_limit, int head_dim, bool vec_ok, int tid) {
  constexpr int kD = Tr::kHeadDim;
  constexpr int kStride = Tr::kStride;
  constexpr int kThreads = Tr::kThreads;
  if (vec_ok) {
    constexpr int kChunksPerRow = kD / Tr::kVec;
    constexpr int kChunks = kRows * kChunksPerRow;
NMT_FLASH_UNROLL
    for (int c0 = 0; c0 < kChunks; c0 += kThreads) {
      const int c = c0 + tid;
      if (kChunks % kThreads != 0 && c >= kChunks) break;
      const int r = c / kChunksPerRow;
      const int d = (c % kChunksPerRow) * Tr::kVec;
      const bool valid = row0 + r < row_limit && d < head_dim;
      const float* g = valid ? src + static_cast<int64_t>(row0 + r) * stride_t + d : src;
      cp_async_16(tile + r * kStride + d, g, valid);
    }
  } else {
    for (int e = tid; e < kRows * kD; e += kThreads) {
      const int r = e / kD;
      const int d = e % kD;
      const bool valid = row0 + r < row_limit && d < head_dim;
      tile[r * kStride + d] = valid ? src[static_cast<int64_t>(row0 + r) * stride_t + d] : 0.0f;
    }
  }
}

// ---------------------------------------------------------------------------
// Register helpers.
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Where a block works: the same in every flash kernel, float32 and bf16.
// ---------------------------------------------------------------------------
// A block of a launch with grid.x = B * H * n_blocks, its own block index
// fastest (so blocks resident together share one head's K and V in L2): its
// (batch, head) and block. Causal query-block launches ask for the longest
// blocks (the most keys) first, for a shorter tail. With heads_fastest the
// (batch, head) varies fastest instead: every head's first block is
// dispatched before any head's second, so with longest_first (or in a kernel
// whose block 0 is its longest) the longest blocks of all heads start first
// and the short ones fill the tail.
struct BlockPlace {
  int64_t bh, b, h;
  int block;
};
template <class Params>
__device__ __forceinline__ BlockPlace block_place(const Params& p, int n_blocks, bool longest_first,
                                                  bool heads_fastest = false) {
  BlockPlace w;
  if (heads_fastest) {
    const int64_t heads = p.batch * p.heads;
    w.bh = blockIdx.x % heads;
    w.block = static_cast<int>(blockIdx.x / heads);
  } else {
    w.bh = blockIdx.x / n_blocks;
    w.block = static_cast<int>(blockIdx.x % n_blocks);
  }
  if (longest_first) w.block = n_blocks - 1 - w.block;
  w.b = w.bh / p.heads;
  w.h = w.bh % p.heads;
  return w;
}

// Batch row b's keys that are not padding: key_lengths[b] clamped to [0, Tk].
template <class Params>
__device__ __forceinline__ int key_length(const Params& p, int64_t b) {
  const int tk = static_cast<int>(p.k_len);
  if (p.key_lengths == nullptr) return tk;
  const int64_t len = p.key_lengths[b];
  return len < 0 ? 0 : (len < tk ? static_cast<int>(len) : tk);
}

// Keys [0, end) that some row of the query block [q0, q0 + rows) sees: under
// the causal mask its last row (or the sequence's) sees keys up to itself.
__device__ __forceinline__ int visible_keys(int key_len, bool causal, int q0, int rows, int tq) {
  return causal ? min(key_len, min(q0 + rows, tq)) : key_len;
}

NMT_FLASH_HD float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }

NMT_FLASH_HD float get(const float4 v, int c) {
  return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;  // c is unrolled: no branch
}

// Reads kN consecutive shared floats (16- or 8-byte aligned when kN is 4 or 2).
template <int kN>
NMT_FLASH_HD void load_row_patch(const float* src, float (&dst)[kN]) {
  if constexpr (kN == 4) {
    const float4 v = *reinterpret_cast<const float4*>(src);
    dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
  } else if constexpr (kN == 2) {
    const float2 v = *reinterpret_cast<const float2*>(src);
    dst[0] = v.x, dst[1] = v.y;
  } else {
NMT_FLASH_UNROLL
    for (int n = 0; n < kN; ++n) dst[n] = src[n];
  }
}

// Zeroes a register patch of any rank.
NMT_FLASH_HD void zero(float& x) { x = 0.0f; }
template <typename T, int kN>
NMT_FLASH_HD void zero(T (&x)[kN]) {
NMT_FLASH_UNROLL
  for (int n = 0; n < kN; ++n) zero(x[n]);
}

// The multiply core: acc + a . b, in order x, y, z, w.
NMT_FLASH_HD float dot4(const float4 a, const float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

// The accumulate core: acc[c] += a * b[c] for the 4 columns of one vector.
NMT_FLASH_HD void fma4(float (&acc)[4], float a, const float4 b) {
  acc[0] = fmaf(a, b.x, acc[0]);
  acc[1] = fmaf(a, b.y, acc[1]);
  acc[2] = fmaf(a, b.z, acc[2]);
  acc[3] = fmaf(a, b.w, acc[3]);
}

// ---------------------------------------------------------------------------
// The tile multiplies. (rg, cg) is the thread's row / column group
// (tid / kColGroups, tid % kColGroups); every sum runs over k in increasing
// order with one fmaf per term, so a thread's result equals a sequential
// float loop, bit for bit.
// ---------------------------------------------------------------------------

// Score-like patch: S += A B^T over the head dim (S = Q K^T, dP = dO V^T).
//   a: [kBr][kStride] smem (queries), b: [kBc][kStride] smem (keys)
//   s[t][u] += sum_{d < kD} a[row_of(rg, t)][d] * b[key_of(cg, u)][d]
// Per step: kTm + kTn 16-byte loads feed kTm * kTn * 4 FMAs.
template <class Tr, int kUnroll>
NMT_FLASH_HD void mma_abt(float (&s)[Tr::kTm][Tr::kTn], const float* a, const float* b, int rg,
                          int cg) {
  constexpr int kStride = Tr::kStride;
NMT_FLASH_UNROLL_N(kUnroll)
  for (int d = 0; d < Tr::kHeadDim; d += 4) {
    float4 av[Tr::kTm];
NMT_FLASH_UNROLL
    for (int t = 0; t < Tr::kTm; ++t) av[t] = lds4(a + Tr::row_of(rg, t) * kStride + d);
NMT_FLASH_UNROLL
    for (int u = 0; u < Tr::kTn; ++u) {
      const float4 bv = lds4(b + Tr::key_of(cg, u) * kStride + d);
NMT_FLASH_UNROLL
      for (int t = 0; t < Tr::kTm; ++t) s[t][u] = dot4(av[t], bv, s[t][u]);
    }
  }
}

// Output-like patch: C += A B over the keys of the tile (O += P V,
// dQ += dS K).
//   a: [kBr][kPStride] smem (P or scale * dS), b: [kBc][kStride] smem (V or K)
//   c[t][e][i] += sum_{j < kBc} a[row_of(rg, t)][j] * b[j][dcol_of(cg, e) + i]
// A is read 4 keys at a time (one float4 per row), B one row at a time.
template <class Tr, int kUnroll>
NMT_FLASH_HD void mma_ab(float (&c)[Tr::kTm][Tr::kTd][4], const float* a, const float* b,
                         int rg, int cg) {
  constexpr int kStride = Tr::kStride;
  constexpr int kPStride = Tr::kPStride;
NMT_FLASH_UNROLL_N(kUnroll)
  for (int j = 0; j < Tr::kBc; j += 4) {
    float4 av[Tr::kTm];
NMT_FLASH_UNROLL
    for (int t = 0; t < Tr::kTm; ++t) av[t] = lds4(a + Tr::row_of(rg, t) * kPStride + j);
NMT_FLASH_UNROLL
    for (int jj = 0; jj < 4; ++jj) {
NMT_FLASH_UNROLL
      for (int e = 0; e < Tr::kTd; ++e) {
        const float4 bv = lds4(b + (j + jj) * kStride + Tr::dcol_of(cg, e));
NMT_FLASH_UNROLL
        for (int t = 0; t < Tr::kTm; ++t) fma4(c[t][e], get(av[t], jj), bv);
      }
    }
  }
}

// Key-row patches, two at once: C1 += A1^T B1 and C2 += A2^T B2 over the
// queries of the tile (dV += P^T dO, dK += (scale * dS)^T Q). One pass over
// the queries serves both, so each query row's loop overhead is paid once.
//   a1, a2: [kBr][kPStride] smem (P, scale * dS); b1, b2: [kBr][kStride] smem (dO, Q)
//   c[r][e][i] += sum_{q < kBr} a[q][key_row_of(rg, r)] * b[q][dcol_of(cg, e) + i]
template <class Tr, int kUnroll>
NMT_FLASH_HD void mma_atb_x2(float (&c1)[Tr::kJn][Tr::kTd][4], const float* a1, const float* b1,
                             float (&c2)[Tr::kJn][Tr::kTd][4], const float* a2, const float* b2,
                             int rg, int cg) {
  constexpr int kStride = Tr::kStride;
  constexpr int kPStride = Tr::kPStride;
  constexpr int kJn = Tr::kJn;
NMT_FLASH_UNROLL_N(kUnroll)
  for (int q = 0; q < Tr::kBr; ++q) {
    float a1v[kJn];
    float a2v[kJn];
    load_row_patch<kJn>(a1 + q * kPStride + Tr::key_row_of(rg, 0), a1v);
    load_row_patch<kJn>(a2 + q * kPStride + Tr::key_row_of(rg, 0), a2v);
NMT_FLASH_UNROLL
    for (int e = 0; e < Tr::kTd; ++e) {
      const float4 b1v = lds4(b1 + q * kStride + Tr::dcol_of(cg, e));
      const float4 b2v = lds4(b2 + q * kStride + Tr::dcol_of(cg, e));
NMT_FLASH_UNROLL
      for (int r = 0; r < kJn; ++r) {
        fma4(c1[r][e], a1v[r], b1v);
        fma4(c2[r][e], a2v[r], b2v);
      }
    }
  }
}

}  // namespace nmt::ops::cuda::flash
