#include "ops/linear/cpu/rows_matmul_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu_parallel.h"
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

// Where w's element (k, j) is, and how far apart (k, j) and (k + 1, j) are,
// in either layout (RowsMatmulParams::panels).
const float* w_at(const RowsMatmulParams& p, int64_t k, int64_t j) {
  return p.w + (p.panels ? panel_index(k, j, p.in) : k * p.out + j);
}
int64_t w_k_stride(const RowsMatmulParams& p) { return p.panels ? kPanel : p.out; }
static_assert(kPanel % kBlock == 0, "a column block lies within one panel");

// y[m0 .. m0+R) x [j0, j0 + NV vectors): accumulators start at the bias,
// then take x[m][k] · w[k][j] for k in order.
template <int R, int NV>
void tile(const RowsMatmulParams& p, int64_t m0, int64_t j0) {
  Vec<float> acc[R][NV];
  for (int v = 0; v < NV; ++v) {
    const Vec<float> b = p.bias ? vec_loadu(p.bias + j0 + v * kLanes<float>) : Vec<float>{};
    for (int r = 0; r < R; ++r) acc[r][v] = b;
  }
  const float* x = p.x + m0 * p.x_stride;
  const float* w0 = w_at(p, 0, j0);
  const int64_t ldw = w_k_stride(p);
  for (int64_t k = 0; k < p.in; ++k) {
    const float* w = w0 + k * ldw;
    Vec<float> wv[NV];
    for (int v = 0; v < NV; ++v) wv[v] = vec_loadu(w + v * kLanes<float>);
    for (int r = 0; r < R; ++r) {
      const Vec<float> xv = vec_set1(x[r * p.x_stride + k]);
      for (int v = 0; v < NV; ++v) acc[r][v] += xv * wv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) vec_storeu(p.y + (m0 + r) * p.out + j0 + v * kLanes<float>, acc[r][v]);
}

// Every group of rows for the NV vectors of columns at j0.
template <int NV>
void column_block(const RowsMatmulParams& p, int64_t j0) {
  int64_t m0 = 0;
  for (; m0 + kRows <= p.rows; m0 += kRows) tile<kRows, NV>(p, m0, j0);
  // The last rows (fewer than kRows), one tile of the matching height.
  switch (p.rows - m0) {
    case 5: if constexpr (kRows > 5) tile<5, NV>(p, m0, j0); break;
    case 4: if constexpr (kRows > 4) tile<4, NV>(p, m0, j0); break;
    case 3: if constexpr (kRows > 3) tile<3, NV>(p, m0, j0); break;
    case 2: tile<2, NV>(p, m0, j0); break;
    case 1: tile<1, NV>(p, m0, j0); break;
    default: break;
  }
  static_assert(kRows <= 6, "the switch above covers up to 5 leftover rows");
}

// The last columns (fewer than a vector), one element at a time, the same sum.
void tail(const RowsMatmulParams& p, int64_t j0) {
  for (int64_t m = 0; m < p.rows; ++m) {
    const float* x = p.x + m * p.x_stride;
    for (int64_t j = j0; j < p.out; ++j) {
      float acc = p.bias ? p.bias[j] : 0.0f;
      for (int64_t k = 0; k < p.in; ++k) {
        // Fused where the ISA fuses (as the vector tiles' products are),
        // spelled out: left to the compiler, the two layouts' loops were
        // contracted differently and gave different last bits.
#if defined(__FMA__)
        acc = std::fma(x[k], *w_at(p, k, j), acc);
#else
        acc += x[k] * *w_at(p, k, j);
#endif
      }
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
  detail::parallel_for(blocks, blocks > 1 && p.rows * p.in * p.out > (int64_t{1} << 18),
                       [&](int64_t b) { column_block<kVecs>(p, b * kBlock); });
  // pass 2: the whole vectors of columns left over (the [256, 6000] output
  // projection leaves 16 with AVX2), then the last few columns.
  int64_t j0 = blocks * kBlock;
  switch ((p.out - j0) / kLanes<float>) {
    case 3: column_block<3>(p, j0), j0 += 3 * kLanes<float>; break;
    case 2: column_block<2>(p, j0), j0 += 2 * kLanes<float>; break;
    case 1: column_block<1>(p, j0), j0 += kLanes<float>; break;
    default: break;
  }
  static_assert(kVecs == 4, "the switch above covers 1 .. kVecs - 1 vectors");
  if (j0 < p.out) tail(p, j0);
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
