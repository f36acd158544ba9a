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

// A float vector's low and high halves, each widened to a double vector
// (exactly), added lane by lane.
Vec<double> widened_halves_sum(const Vec<float>& v) {
  typedef float HalfFloats __attribute__((vector_size(detail::kVecBytes / 2)));
  HalfFloats lo, hi;
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  return __builtin_convertvector(lo, Vec<double>) + __builtin_convertvector(hi, Vec<double>);
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
  // pass 2: sum exp(x - max): each term in float (16 lanes of a degree-6
  // polynomial, where a double term took 8 lanes of degree 11 and was a
  // fifth of a beam step), the sum in double. A term's relative error is a
  // few float ulps, so log_sum is within about 3e-7 of the double
  // log_softmax's (weighted by the terms, which the near-max ones dominate),
  // as close as float32 logits themselves are to the model's.
  constexpr float kLog2e = 1.44269504088896341f;
  const Vec<float> mv = vec_set1(m);
  Vec<double> acc{};
  j = 0;
  for (; j + L <= n; j += L) {
    const Vec<float> e = vec_exp2((vec_loadu(x + j) - mv) * kLog2e);
    acc += widened_halves_sum(e);
  }
  double sum = vec_sum(acc);
  for (; j < n; ++j) sum += std::exp(static_cast<double>(x[j]) - m);
  *p.log_sum = std::log(sum);
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
