#include "ops/linear/cpu/rows_matmul_cpu.h"

#include <omp.h>

#include <algorithm>

#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

using detail::kAccRegs;
using detail::kLanes;
using detail::Vec;
using detail::vec_loadu;
using detail::vec_set1;
using detail::vec_storeu;

// A register tile: kRows rows of x times kVecs vectors of w's columns.
constexpr int kVecs = 4;
constexpr int kRows = kAccRegs / kVecs;  // 6 with AVX-512, 3 otherwise
constexpr int64_t kBlock = kVecs * kLanes<float>;  // columns per tile

// y[m0 .. m0+R) x [j0, j0 + kBlock): accumulators start at the bias, then
// take x[m][k] · w[k][j] for k in order.
template <int R>
void tile(const RowsMatmulParams& p, int64_t m0, int64_t j0) {
  Vec<float> acc[R][kVecs];
  for (int v = 0; v < kVecs; ++v) {
    const Vec<float> b = p.bias ? vec_loadu(p.bias + j0 + v * kLanes<float>) : Vec<float>{};
    for (int r = 0; r < R; ++r) acc[r][v] = b;
  }
  const float* x = p.x + m0 * p.x_stride;
  for (int64_t k = 0; k < p.in; ++k) {
    const float* w = p.w + k * p.out + j0;
    Vec<float> wv[kVecs];
    for (int v = 0; v < kVecs; ++v) wv[v] = vec_loadu(w + v * kLanes<float>);
    for (int r = 0; r < R; ++r) {
      const Vec<float> xv = vec_set1(x[r * p.x_stride + k]);
      for (int v = 0; v < kVecs; ++v) acc[r][v] += xv * wv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVecs; ++v) vec_storeu(p.y + (m0 + r) * p.out + j0 + v * kLanes<float>, acc[r][v]);
}

template <int R>
void tile_rows(const RowsMatmulParams& p, int64_t m0, int64_t rows, int64_t j0) {
  if constexpr (R > 1) {
    if (rows < R) return tile_rows<R - 1>(p, m0, rows, j0);
  }
  tile<R>(p, m0, j0);
}

// The last columns (fewer than a tile), one element at a time, the same sum.
void tail(const RowsMatmulParams& p, int64_t j0) {
  for (int64_t m = 0; m < p.rows; ++m) {
    const float* x = p.x + m * p.x_stride;
    for (int64_t j = j0; j < p.out; ++j) {
      float acc = p.bias ? p.bias[j] : 0.0f;
      for (int64_t k = 0; k < p.in; ++k) acc += x[k] * p.w[k * p.out + j];
      p.y[m * p.out + j] = acc;
    }
  }
}

}  // namespace

void rows_matmul(const RowsMatmulParams& p) {
  // pass 1: full column tiles, spread over threads; each thread walks its
  // tiles column block by column block, every group of rows in turn, so a
  // block of w (in × kBlock floats) is read from memory once and then from
  // cache.
  const int64_t blocks = p.out / kBlock;
  const bool parallel = blocks > 1 && p.rows * p.in * p.out > (int64_t{1} << 18);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t m0 = 0; m0 < p.rows; m0 += kRows)
      tile_rows<kRows>(p, m0, std::min<int64_t>(kRows, p.rows - m0), b * kBlock);
  // pass 2: the columns left over.
  if (blocks * kBlock < p.out) tail(p, blocks * kBlock);
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
