// See add_layer_norm_cpu.h. One row at a time (C values, in cache):
// forward: pass 1 builds s (y's bias added on the way) and its sum, pass 2
// the centred sum of squares, pass 3 writes n; backward: pass 1 the two row
// reductions of dLayerNorm, pass 2 dx and dy, with gamma/beta gradients and
// dy's column sums (the bias's gradient) summed per thread.
// The loops read every array through a local pointer, never through p or
// an AlignedBuffer: with p.gamma[c] or g[c] in them GCC kept a scalar copy
// of the loop (it could not rule out that a store moves the pointer) and
// ran that copy; so with `drop ? mask[c] : 1` inside one loop. Scalar, the
// LayerNorms took 10% of a bf16 step of configs/real.yaml.
#include "ops/layer_norm/cpu/add_layer_norm_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu_parallel.h"
#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

// Rows per OpenMP chunk: enough work to amortize scheduling.
constexpr int64_t kRowsPerChunk = 16;

}  // namespace

template <typename T, typename U>
void add_layer_norm_forward(const AddLayerNormForwardParams<T, U>& p) {
  const int64_t C = p.channels;
  const bool drop = p.y != nullptr && p.dropout.p > 0;
  // Without a bias y gets zeros (exact: y + 0 is y), one loop for both.
  const bool zeros = p.y != nullptr && p.y_bias == nullptr;
  detail::AlignedBuffer<T> no_bias(zeros ? C : 0);
  if (zeros) std::fill(no_bias.data(), no_bias.data() + C, T(0));
  const T* y_bias = zeros ? no_bias.data() : p.y_bias;
  detail::in_team([&] {
    detail::AlignedBuffer<T> mask(drop ? C : 0);
#pragma omp for schedule(static, kRowsPerChunk)
    for (int64_t r = 0; r < p.rows; ++r) {
      const T* x = p.x + r * C;
      T* s = p.s ? p.s + r * C : nullptr;
      // pass 1: s = x + dropout(y + y_bias), and its sum
      T sum = 0;
      if (p.y) {
        const U* y = p.y + r * C;
        const T* yb = y_bias;
        if (drop) {
          const T* m = mask.data();
          const philox::MaskCoords at = philox::mask_coords(p.dropout, r, p.positions);
          philox::mask_row<T>(p.dropout, at.row, at.position, C, mask.data());
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < C; ++c) {
            const T v = x[c] + (load_as<T>(y[c]) + yb[c]) * m[c];
            s[c] = v;
            sum += v;
          }
        } else {
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < C; ++c) {
            const T v = x[c] + (load_as<T>(y[c]) + yb[c]);
            s[c] = v;
            sum += v;
          }
        }
      } else {
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < C; ++c) sum += x[c];
      }
      const T* sv = p.y ? s : x;
      const T mean = sum / static_cast<T>(C);
      // pass 2: variance around the mean (two passes: no cancellation)
      T sq = 0;
#pragma omp simd reduction(+ : sq)
      for (int64_t c = 0; c < C; ++c) sq += (sv[c] - mean) * (sv[c] - mean);
      const T rstd = static_cast<T>(1) / std::sqrt(sq / static_cast<T>(C) + static_cast<T>(p.eps));
      p.mean[r] = mean;
      p.rstd[r] = rstd;
      // pass 3: n = normalized * gamma + beta
      U* n = p.n + r * C;
      const T *gamma = p.gamma, *beta = p.beta;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) store_as(n + c, (sv[c] - mean) * rstd * gamma[c] + beta[c]);
    }
  });
}

template <typename T, typename U>
void add_layer_norm_backward(const AddLayerNormBackwardParams<T, U>& p) {
  const int64_t C = p.channels;
  const bool drop = p.dy != nullptr && p.dropout.p > 0;
  const int threads = omp_get_max_threads();
  detail::AlignedBuffer<T> partial(3 * C * threads);  // per thread: dgamma, dbeta, dy's column sums
#pragma omp parallel num_threads(threads)
  {
    T* dgamma = partial.data() + 3 * C * omp_get_thread_num();
    T* dbeta = dgamma + C;
    T* dy_sum = dbeta + C;  // summed even without a y bias: one loop, and C adds a row
    std::fill(dgamma, dgamma + 3 * C, T(0));
    detail::AlignedBuffer<T> mask(drop ? C : 0);
    detail::AlignedBuffer<T> g(C);  // dn * gamma of this row
#pragma omp for schedule(static, kRowsPerChunk)
    for (int64_t r = 0; r < p.rows; ++r) {
      const T* s = p.s + r * C;
      const U* dn = p.dn + r * C;
      const T* gamma = p.gamma;
      T* gr = g.data();
      const T mean = p.mean[r], rstd = p.rstd[r];
      // pass 1: the row sums dLayerNorm needs; gamma/beta gradients
      T sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int64_t c = 0; c < C; ++c) {
        const T d = load_as<T>(dn[c]);
        const T xhat = (s[c] - mean) * rstd;
        gr[c] = d * gamma[c];
        sum_g += gr[c];
        sum_gx += gr[c] * xhat;
        dgamma[c] += d * xhat;
        dbeta[c] += d;
      }
      const T inv_c = static_cast<T>(1) / static_cast<T>(C);
      const T a = sum_g * inv_c, b = sum_gx * inv_c;
      // pass 2: dx = ds + rstd * (g - mean(g) - xhat * mean(g * xhat)); dy = dx * mask,
      // and dy's column sums (y_bias's gradient)
      T* dx = p.dx + r * C;
      const T* ds = p.ds ? p.ds + r * C : nullptr;
      U* dy = p.dy ? p.dy + r * C : nullptr;
      const T* m = mask.data();
      if (drop) {
        const philox::MaskCoords at = philox::mask_coords(p.dropout, r, p.positions);
        philox::mask_row<T>(p.dropout, at.row, at.position, C, mask.data());
      }
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const T xhat = (s[c] - mean) * rstd;
        const T v = (ds ? ds[c] : T(0)) + rstd * (gr[c] - a - xhat * b);
        const T w = drop ? v * m[c] : v;
        dx[c] = v;
        if (dy) store_as(dy + c, w);
        dy_sum[c] += w;
      }
    }
  }
  // Sum the threads' partial gradients.
  for (int64_t c = 0; c < C; ++c) {
    T dg = 0, db = 0, dyb = 0;
    for (int t = 0; t < threads; ++t) {
      const T* part = partial.data() + 3 * C * t;
      dg += part[c], db += part[C + c], dyb += part[2 * C + c];
    }
    p.dgamma[c] = dg;
    p.dbeta[c] = db;
    if (p.dy_bias) p.dy_bias[c] = dyb;
  }
}

template void add_layer_norm_forward<float, float>(const AddLayerNormForwardParams<float, float>&);
template void add_layer_norm_forward<double, double>(const AddLayerNormForwardParams<double, double>&);
template void add_layer_norm_forward<float, bf16>(const AddLayerNormForwardParams<float, bf16>&);
template void add_layer_norm_backward<float, float>(const AddLayerNormBackwardParams<float, float>&);
template void add_layer_norm_backward<double, double>(const AddLayerNormBackwardParams<double, double>&);
template void add_layer_norm_backward<float, bf16>(const AddLayerNormBackwardParams<float, bf16>&);

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
