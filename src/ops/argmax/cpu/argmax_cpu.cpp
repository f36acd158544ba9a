#include "ops/argmax/cpu/argmax_cpu.h"

#include <cmath>
#include <limits>

#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

using detail::kLanes;
using detail::Vec;
using detail::vec_any;
using detail::vec_hmax;
using detail::vec_loadu;
using detail::vec_set1;
using Mask = typename detail::Simd<float>::Mask;

int64_t argmax_row(const float* x, int64_t n) {
  constexpr int L = kLanes<float>;
  // pass 1: the largest value, and whether any is NaN (NaN != NaN). A lane
  // keeps its own maximum; the row's is the largest of the lanes'.
  Vec<float> top = vec_set1(-std::numeric_limits<float>::infinity());
  Mask nan{};
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    const Vec<float> v = vec_loadu(x + j);
    nan |= v != v;
    top = v > top ? v : top;
  }
  float best = vec_hmax(top);
  bool has_nan = vec_any(nan);
  for (; j < n; ++j) {
    has_nan |= std::isnan(x[j]);
    best = x[j] > best ? x[j] : best;
  }
  // A NaN wins wherever it is: the first one.
  if (has_nan)
    for (j = 0; j < n; ++j)
      if (std::isnan(x[j])) return j;
  // pass 2: the first place that holds the largest value (a row of -inf
  // holds it at 0).
  const Vec<float> want = vec_set1(best);
  for (j = 0; j + L <= n; j += L) {
    const Mask hit = vec_loadu(x + j) == want;
    if (vec_any(hit))
      for (int i = 0; i < L; ++i)
        if (hit[i]) return j + i;
  }
  for (; j < n; ++j)
    if (x[j] == best) return j;
  return 0;  // not reached: best is one of x's values
}

}  // namespace

void argmax_rows(const ArgmaxParams& p) {
  for (int64_t r = 0; r < p.rows; ++r) p.out[r] = argmax_row(p.x + r * p.stride, p.cols);
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
