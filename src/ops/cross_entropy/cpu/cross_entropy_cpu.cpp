// See cross_entropy_cpu.h. Per row (V values, in cache): pass 1 max and sum
// of logits, pass 2 sum of exp(z - max), pass 3 the gradient.
#include "ops/cross_entropy/cpu/cross_entropy_cpu.h"

#include <omp.h>

#include <cmath>
#include <limits>

#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

constexpr double kLog2e = 1.4426950408889634;

template <typename T, typename U>
void one_row(const CrossEntropyParams<T, U>& p, int64_t r) {
  using V = detail::Vec<T>;
  constexpr int L = detail::kLanes<T>;
  const int64_t n = p.classes;
  const U* z = p.logits + r * p.logits_stride;
  U* g = p.grad ? p.grad + r * n : nullptr;
  const int64_t y = p.labels[r];
  if (y == p.ignore_index) {
    p.loss[r] = 0;
    if (p.nll) p.nll[r] = 0;
    if (g)
      for (int64_t v = 0; v < n; ++v) store_as(g + v, T(0));
    return;
  }
  const int64_t body = n / L * L;
  // pass 1: max and sum of the logits
  V vmax = detail::vec_set1<T>(-std::numeric_limits<T>::infinity()), vsum = V{};
  for (int64_t v = 0; v < body; v += L) {
    const V x = detail::vec_loadu(z + v);
    vmax = detail::vec_max(vmax, x);
    vsum += x;
  }
  T max = detail::vec_hmax(vmax), sum = detail::vec_sum(vsum);
  for (int64_t v = body; v < n; ++v) {
    const T x = load_as<T>(z[v]);
    max = x > max ? x : max;
    sum += x;
  }
  // pass 2: sum of exp(z - max), as 2^((z - max) log2 e)
  const T log2e = static_cast<T>(kLog2e);
  const V vshift = detail::vec_set1<T>(max * log2e);
  V vexp = V{};
  for (int64_t v = 0; v < body; v += L)
    vexp += detail::vec_exp2(detail::vec_loadu(z + v) * log2e - vshift);
  T sumexp = detail::vec_sum(vexp);
  for (int64_t v = body; v < n; ++v) sumexp += std::exp(load_as<T>(z[v]) - max);
  const T lse = max + std::log(sumexp);
  const T e = static_cast<T>(p.smoothing);
  p.loss[r] = (1 - e) * (lse - load_as<T>(z[y])) + e * (lse - sum / static_cast<T>(n));
  if (p.nll) p.nll[r] = lse - load_as<T>(z[y]);
  if (!g) return;
  // pass 3: softmax - smoothed target
  const T off = e / static_cast<T>(n);
  const V vlse = detail::vec_set1<T>(lse * log2e);
  for (int64_t v = 0; v < body; v += L)
    detail::vec_storeu(g + v, detail::vec_exp2(detail::vec_loadu(z + v) * log2e - vlse) - off);
  for (int64_t v = body; v < n; ++v) store_as(g + v, std::exp(load_as<T>(z[v]) - lse) - off);
  store_as(g + y, std::exp(load_as<T>(z[y]) - lse) - off - (1 - e));
}

}  // namespace

template <typename T, typename U>
void cross_entropy(const CrossEntropyParams<T, U>& p) {
#pragma omp parallel for schedule(static, 4)
  for (int64_t r = 0; r < p.rows; ++r) one_row(p, r);
}

template void cross_entropy<float, float>(const CrossEntropyParams<float, float>&);
template void cross_entropy<double, double>(const CrossEntropyParams<double, double>&);
template void cross_entropy<float, bf16>(const CrossEntropyParams<float, bf16>&);

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
