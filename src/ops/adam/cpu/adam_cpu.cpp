#include "ops/adam/cpu/adam_cpu.h"

#include <omp.h>

#include <cmath>

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

// One pass over every buffer; with kEma the moving average of the new
// weights is updated in the same pass (two more streams of memory, no second
// read of the weights). kEma is a template argument so that neither loop
// carries a branch the vectoriser must keep.
template <typename T, bool kEma>
void adam_pass(const AdamParams<T>& p) {
  // Scalars in double, then rounded once, as LibTorch does with its Scalars.
  const T b1 = static_cast<T>(p.beta1), b2 = static_cast<T>(p.beta2);
  const T one_minus_b1 = static_cast<T>(1 - p.beta1), one_minus_b2 = static_cast<T>(1 - p.beta2);
  const double bias_correction1 = 1 - std::pow(p.beta1, static_cast<double>(p.step));
  const double bias_correction2 = 1 - std::pow(p.beta2, static_cast<double>(p.step));
  const T step_size = static_cast<T>(p.lr / bias_correction1);
  const T sqrt_bc2 = static_cast<T>(std::sqrt(bias_correction2));
  const T eps = static_cast<T>(p.eps), wd = static_cast<T>(p.weight_decay);
  const T scale = static_cast<T>(p.grad_scale);
  const T ema_weight = static_cast<T>(1 - p.ema_decay);
  T* const ema = p.ema;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < p.count; ++i) {
    T g = p.grad[i] * scale;
    if (wd != 0) g = g + wd * p.param[i];
    const T m = p.exp_avg[i] * b1 + one_minus_b1 * g;
    const T v = p.exp_avg_sq[i] * b2 + one_minus_b2 * g * g;
    p.exp_avg[i] = m;
    p.exp_avg_sq[i] = v;
    const T denom = std::sqrt(v) / sqrt_bc2 + eps;
    const T w = p.param[i] - step_size * (m / denom);
    p.param[i] = w;
    if constexpr (kEma) ema[i] = ema[i] + ema_weight * (w - ema[i]);
  }
}

}  // namespace

template <typename T>
void adam_step(const AdamParams<T>& p) {
  if (p.ema) adam_pass<T, true>(p);
  else adam_pass<T, false>(p);
}

template <typename T>
double sum_of_squares(const T* x, int64_t count) {
  double total = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : total)
  for (int64_t i = 0; i < count; ++i) total += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return total;
}

template void adam_step<float>(const AdamParams<float>&);
template void adam_step<double>(const AdamParams<double>&);
template double sum_of_squares<float>(const float*, int64_t);
template double sum_of_squares<double>(const double*, int64_t);

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
