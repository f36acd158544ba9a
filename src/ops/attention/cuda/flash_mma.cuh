// The tensor-core primitives of the bf16 flash kernels (forward in
// flash_attention_bf16.cu, backward in flash_attention_bf16_bwd.cu):
// mma.sync m16n8k16 with bf16 operands and float32 accumulators, ldmatrix,
// the cooperative bf16 tile copy, and the lane maps that say which element of
// a 16x16 / 16x8 tile each lane holds or addresses.
//
// The lane maps are __host__ __device__ and the kernels compute every
// ldmatrix address and every accumulator coordinate through them, so
// tests/cuda/flash_tile_emulation_test.cu can emulate ldmatrix and mma.sync
// on the CPU from the PTX ISA's fragment tables, compose them with these maps
// exactly as the kernels do, and compare with a plain matrix product (one
// warp, every fragment kind the kernels use).
//
// Fragments of mma.m16n8k16.row.col (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"), with g = lane / 4, t = lane % 4:
//   A [16 x 16] (m x k), 4 registers of bf16 pairs:
//     a0: row g,     cols 2t, 2t+1        a1: row g + 8, cols 2t, 2t+1
//     a2: row g,     cols 2t+8, 2t+9      a3: row g + 8, cols 2t+8, 2t+9
//   B [16 x 8] (k x n), 2 registers:  b0: k 2t, 2t+1, n g    b1: k 2t+8, 2t+9, n g
//   C/D [16 x 8] float32, 4 registers:
//     c0, c1: row g, cols 2t, 2t+1        c2, c3: row g + 8, cols 2t, 2t+1
// So the accumulators of two adjacent n8 tiles (columns 0-7 and 8-15 of a
// 16 x 16 block) are, rounded to bf16 pairs, the A fragment of that block:
// a score tile goes from one mma's output to the next mma's input without
// touching shared memory.
#pragma once

#include <cstdint>

#include "ops/attention/cuda/flash_kernel_traits.h"
#include "ops/bf16.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "ops/attention/cuda/flash_tile.cuh"
#endif

namespace nmt::ops::cuda::flash::mma {

// ---------------------------------------------------------------------------
// Lane maps (host and device).
// ---------------------------------------------------------------------------

// Accumulator register c (0..3) of `lane`: its row and column in the 16 x 8 tile.
NMT_FLASH_HD constexpr int acc_row(int lane, int c) { return lane / 4 + 8 * (c / 2); }
NMT_FLASH_HD constexpr int acc_col(int lane, int c) { return 2 * (lane % 4) + c % 2; }

// ldmatrix.x4 reads four 8 x 8 matrices; lane l gives the address of row
// l % 8 of matrix l / 8. These return, for the fragment kinds the kernels
// load, the (row, column) of the shared-memory tile whose address `lane`
// gives, relative to the fragment's corner.
//
// A operand of a [16 x 16] block of a row-major [m][k] tile (non-transposed):
// matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15)
// = a0, a1, a2, a3.
NMT_FLASH_HD constexpr int ldsm_a_row(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
NMT_FLASH_HD constexpr int ldsm_a_col(int lane) { return 8 * (lane / 16); }
// B operands of two n8 tiles (n 0-7 and 8-15) for one k16 step, from a tile
// stored [n][k] (row = n; K for S = Q K^T): matrices (n 0-7, k 0-7),
// (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0, b1 of tile 0,
// b0, b1 of tile 1.
NMT_FLASH_HD constexpr int ldsm_bn_row(int lane) { return lane % 8 + 8 * (lane / 16); }
NMT_FLASH_HD constexpr int ldsm_bn_col(int lane) { return 8 * ((lane / 8) % 2); }
// The same from a tile stored [k][n] (row = k; V for O = P V), with
// ldmatrix.trans: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
// (k 8-15, n 8-15) = b0, b1 of tile 0, b0, b1 of tile 1.
NMT_FLASH_HD constexpr int ldsm_bk_row(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
NMT_FLASH_HD constexpr int ldsm_bk_col(int lane) { return 8 * (lane / 16); }

// A operand of a [16 x 16] block from a tile stored transposed, [k][m]
// (dS^T for dQ = dS K), with ldmatrix.trans: matrices (m 0-7, k 0-7),
// (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) = a0 .. a3 are stored
// at (k 0-7, m 0-7), (k 0-7, m 8-15), (k 8-15, m 0-7), (k 8-15, m 8-15).
NMT_FLASH_HD constexpr int ldsm_at_row(int lane) { return lane % 8 + 8 * (lane / 16); }
NMT_FLASH_HD constexpr int ldsm_at_col(int lane) { return 8 * ((lane / 8) % 2); }

// Element offsets of those addresses in a tile of row stride kStride: the
// fragment's corner at (row0, col0) in the tile's own (row, column) terms.
template <int kStride>
NMT_FLASH_HD constexpr int a_offset(int row0, int col0, int lane) {
  return (row0 + ldsm_a_row(lane)) * kStride + col0 + ldsm_a_col(lane);
}
template <int kStride>
NMT_FLASH_HD constexpr int b_nk_offset(int n0, int k0, int lane) {
  return (n0 + ldsm_bn_row(lane)) * kStride + k0 + ldsm_bn_col(lane);
}
template <int kStride>
NMT_FLASH_HD constexpr int b_kn_offset(int k0, int n0, int lane) {
  return (k0 + ldsm_bk_row(lane)) * kStride + n0 + ldsm_bk_col(lane);
}
template <int kStride>
NMT_FLASH_HD constexpr int a_km_offset(int m0, int k0, int lane) {
  return (k0 + ldsm_at_row(lane)) * kStride + m0 + ldsm_at_col(lane);
}

// The A fragment of k16 step kk from the accumulators of n8 tiles 2kk and
// 2kk + 1 (see the fragment table above); pack(lo, hi) makes one register of
// a bf16 pair (the device's pack_bf16, or the emulation test's).
template <class Reg, class Pack, int kTiles>
NMT_FLASH_HD void acc_to_a_with(Reg (&a)[4], const float (&acc)[kTiles][4], int kk, Pack pack) {
  a[0] = pack(acc[2 * kk][0], acc[2 * kk][1]);
  a[1] = pack(acc[2 * kk][2], acc[2 * kk][3]);
  a[2] = pack(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
  a[3] = pack(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}

#if defined(__CUDACC__)

// ---------------------------------------------------------------------------
// What the forward and the backward share on the host: constants and the
// checks their _supported functions make.
// ---------------------------------------------------------------------------

// The softmax runs in base 2 (ex2.approx): scores and lse are scaled by log2(e).
constexpr float kLog2e = 1.4426950408889634f;
// The largest head dim the tensor-core kernels take (padded to 64 or 128).
constexpr int kMaxHeadDim = 128;

inline bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }
// bf16 rows cp.async can copy 16 bytes at a time: an aligned start and
// strides in whole 16-byte units.
inline bool rows_16b(const bf16* ptr, int64_t sb, int64_t sh, int64_t st) {
  return aligned16(ptr) && sb % 8 == 0 && sh % 8 == 0 && st % 8 == 0;
}
// The current GPU has mma.sync for bf16 (compute capability 8.0 or later).
inline bool bf16_mma_device() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 8;
}

// ---------------------------------------------------------------------------
// Device primitives (inline PTX, sm_80 and later; empty on older targets,
// whose launches the _supported checks refuse).
// ---------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 bf16 matrices; lanes 8m .. 8m + 7 give the row addresses of
// matrix m. Lane l receives, from matrix m, row l / 4, columns 2 (l % 4) and
// 2 (l % 4) + 1 in r[m] (.trans: column l / 4, rows 2 (l % 4) and + 1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

// d += a b for one m16n8k16 tile: a [16 x 16] row-major (4 registers of bf16
// pairs), b [16 x 8] column-major (2 registers), d [16 x 8] float32.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Two floats as a bf16 pair, the first in the low half (the lower column).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// acc_to_a_with, rounding to bf16 pairs on the device.
template <int kTiles>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&acc)[kTiles][4], int kk) {
  acc_to_a_with(a, acc, kk, [](float lo, float hi) { return pack_bf16(lo, hi); });
}

// 2^x with the hardware approximation (2 ulp; ex2.approx(-inf) = +0): the
// softmax's exponentials would otherwise cost several instructions each.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Rows [row0, row0 + kRows) of one head's [T, D] bf16 matrix into the shared
// tile [kRows][Tr::kStride], 16 bytes per cp.async. Rows >= row_limit and
// columns >= head_dim (a multiple of 8) are zero-filled.
template <int kRows, class Tr>
__device__ __forceinline__ void load_tile_bf16(bf16* tile, const bf16* src, int64_t stride_t,
                                               int row0, int row_limit, int head_dim, int tid) {
  constexpr int kChunksPerRow = Tr::kHeadDim / Tr::kVec;
  constexpr int kChunks = kRows * kChunksPerRow;
#pragma unroll
  for (int c0 = 0; c0 < kChunks; c0 += Tr::kThreads) {
    const int c = c0 + tid;
    if (kChunks % Tr::kThreads != 0 && c >= kChunks) break;
    const int r = c / kChunksPerRow;
    const int d = (c % kChunksPerRow) * Tr::kVec;
    const bool valid = row0 + r < row_limit && d < head_dim;
    const bf16* g = valid ? src + static_cast<int64_t>(row0 + r) * stride_t + d : src;
    cp_async_16(tile + r * Tr::kStride + d, g, valid);
  }
}

// A fragment of the [16 x 16] block at (row0, col0) of a row-major smem tile.
template <int kStride>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* tile, int row0, int col0,
                                       int lane) {
  ldmatrix_x4(a, smem_u32(tile + a_offset<kStride>(row0, col0, lane)));
}
// B fragments of the two n8 tiles at n0, k16 step at k0, of a tile stored [n][k].
template <int kStride>
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], const bf16* tile, int n0, int k0,
                                          int lane) {
  ldmatrix_x4(b, smem_u32(tile + b_nk_offset<kStride>(n0, k0, lane)));
}
// The same from a tile stored [k][n] (ldmatrix.trans).
template <int kStride>
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], const bf16* tile, int k0, int n0,
                                          int lane) {
  ldmatrix_x4_trans(b, smem_u32(tile + b_kn_offset<kStride>(k0, n0, lane)));
}

// A fragment of the [16 x 16] block at (m0, k0) of a tile stored [k][m]
// (ldmatrix.trans).
template <int kStride>
__device__ __forceinline__ void load_a_km(uint32_t (&a)[4], const bf16* tile, int m0, int k0,
                                          int lane) {
  ldmatrix_x4_trans(a, smem_u32(tile + a_km_offset<kStride>(m0, k0, lane)));
}

#endif  // __CUDACC__

}  // namespace nmt::ops::cuda::flash::mma
