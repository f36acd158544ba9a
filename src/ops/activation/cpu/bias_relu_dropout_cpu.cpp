#include "ops/activation/cpu/bias_relu_dropout_cpu.h"

#include <omp.h>

#include <algorithm>

#include "ops/cpu_parallel.h"
#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

// The loops read every array through a local pointer and hold no
// `drop ? ... : ...`: either kept GCC on a scalar copy of the loop (see
// add_layer_norm_cpu.cpp).

template <typename T, typename U>
void bias_relu_dropout_forward(const BiasReluDropoutParams<T, U>& p) {
  const int64_t F = p.channels;
  const bool drop = p.dropout.p > 0;
  detail::in_team([&] {
    detail::AlignedBuffer<T> mask(drop ? F : 0);
#pragma omp for schedule(static, 8)
    for (int64_t r = 0; r < p.rows; ++r) {
      if (drop) {
        const philox::MaskCoords at = philox::mask_coords(p.dropout, r, p.positions);
        philox::mask_row<T>(p.dropout, at.row, at.position, F, mask.data());
      }
      const U* h = p.h + r * F;
      U* out = p.out + r * F;
      const T *bias = p.bias, *m = mask.data();
      if (drop) {
#pragma omp simd
        for (int64_t c = 0; c < F; ++c) store_as(out + c, std::max(load_as<T>(h[c]) + bias[c], T(0)) * m[c]);
      } else {
#pragma omp simd
        for (int64_t c = 0; c < F; ++c) store_as(out + c, std::max(load_as<T>(h[c]) + bias[c], T(0)));
      }
    }
  });
}

template <typename T, typename U>
void bias_relu_dropout_backward(const BiasReluDropoutBackwardParams<T, U>& p) {
  const int64_t F = p.channels;
  const T scale = static_cast<T>(1.0 / (1.0 - static_cast<double>(p.p)));
  const int threads = omp_get_max_threads();
  detail::AlignedBuffer<T> partial(F * threads);
#pragma omp parallel num_threads(threads)
  {
    T* dbias = partial.data() + F * omp_get_thread_num();
    std::fill(dbias, dbias + F, T(0));
#pragma omp for schedule(static, 8)
    for (int64_t r = 0; r < p.rows; ++r) {
      const U* out = p.out + r * F;
      const U* dout = p.dout + r * F;
      U* dh = p.dh + r * F;
#pragma omp simd
      for (int64_t c = 0; c < F; ++c) {
        const T d = load_as<T>(out[c]) > T(0) ? load_as<T>(dout[c]) * scale : T(0);
        store_as(dh + c, d);
        dbias[c] += d;
      }
    }
  }
  for (int64_t c = 0; c < F; ++c) {
    T sum = 0;
    for (int t = 0; t < threads; ++t) sum += partial[F * t + c];
    p.dbias[c] = sum;
  }
}

template void bias_relu_dropout_forward<float, float>(const BiasReluDropoutParams<float, float>&);
template void bias_relu_dropout_forward<double, double>(const BiasReluDropoutParams<double, double>&);
template void bias_relu_dropout_forward<float, bf16>(const BiasReluDropoutParams<float, bf16>&);
template void bias_relu_dropout_backward<float, float>(const BiasReluDropoutBackwardParams<float, float>&);
template void bias_relu_dropout_backward<double, double>(const BiasReluDropoutBackwardParams<double, double>&);
template void bias_relu_dropout_backward<float, bf16>(const BiasReluDropoutBackwardParams<float, bf16>&);

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
