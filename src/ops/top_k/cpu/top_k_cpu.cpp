#include "ops/top_k/cpu/top_k_cpu.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

using detail::kLanes;
using detail::Vec;
using detail::vec_exp2;
using detail::vec_any;
using detail::vec_hmax;
using detail::vec_loadu;
using detail::vec_set1;
using detail::vec_sum;
using FloatMask = typename detail::Simd<float>::Mask;

// Half a float vector's lanes, widened to a double vector.
typedef float HalfFloats __attribute__((vector_size(detail::kVecBytes / 2)));
Vec<double> widen(const float* x) {
  HalfFloats h;
  std::memcpy(&h, x, sizeof h);
  return __builtin_convertvector(h, Vec<double>);
}

// The k best so far, largest first; an entry equal to the k-th does not
// enter (it comes later in the row: the lower index wins a tie).
struct Best {
  const TopKParams& p;
  int64_t held = 0;
  float floor() const { return held < p.k ? -std::numeric_limits<float>::infinity() : p.top_value[p.k - 1]; }
  void offer(float v, int64_t index) {
    if (!(v > floor()) && held == p.k) return;
    if (!(v > -std::numeric_limits<float>::infinity())) return;  // -inf (masked) and NaN never chosen
    int64_t at = held < p.k ? held++ : p.k - 1;
    while (at > 0 && p.top_value[at - 1] < v) {
      p.top_value[at] = p.top_value[at - 1], p.top_index[at] = p.top_index[at - 1];
      --at;
    }
    p.top_value[at] = v, p.top_index[at] = index;
  }
};

}  // namespace

void log_softmax_top_k(const TopKParams& p) {
  constexpr int L = kLanes<float>;
  const float* x = p.x;
  const int64_t n = p.cols;
  for (int64_t i = 0; i < p.k; ++i) p.top_index[i] = -1, p.top_value[i] = -std::numeric_limits<float>::infinity();
  Best best{p};
  // pass 1: the largest value, and the k largest: a block enters the
  // scalar insertion only where one of its values beats the k-th so far.
  Vec<float> top = vec_set1(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    const Vec<float> v = vec_loadu(x + j);
    top = v > top ? v : top;
    const FloatMask enters = v > vec_set1(best.floor());
    if (best.held < p.k || vec_any(enters))
      for (int i = 0; i < L; ++i) best.offer(v[i], j + i);
  }
  float m = vec_hmax(top);
  for (; j < n; ++j) {
    m = x[j] > m ? x[j] : m;
    best.offer(x[j], j);
  }
  if (!p.normalizer) return;
  *p.max = m;
  // pass 2: sum exp(x - max) in double: exp(d) = 2^(d log2 e), d exact in
  // double (two floats' difference), the polynomial within 1-2 ulp.
  constexpr int D = kLanes<double>;
  constexpr double kLog2e = 1.4426950408889634074;
  const double md = m;
  Vec<double> acc{};
  j = 0;
  for (; j + D <= n; j += D) acc += vec_exp2((widen(x + j) - md) * kLog2e);
  double sum = vec_sum(acc);
  for (; j < n; ++j) sum += std::exp(static_cast<double>(x[j]) - md);
  *p.log_sum = std::log(sum);
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
