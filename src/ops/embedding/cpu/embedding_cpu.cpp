#include "ops/embedding/cpu/embedding_cpu.h"

#include <omp.h>

#include <algorithm>

#include "ops/cpu_parallel.h"
#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

// The loops read every array through a local pointer and hold no
// `drop ? ... : ...`: either kept GCC on a scalar copy of the loop (see
// add_layer_norm_cpu.cpp).

template <typename T>
void embedding_forward(const EmbeddingParams<T>& p) {
  const int64_t C = p.channels;
  const bool drop = p.dropout.p > 0;
  detail::in_team([&] {
    detail::AlignedBuffer<T> mask(drop ? C : 0);
#pragma omp for schedule(static, 16)
    for (int64_t r = 0; r < p.batch * p.length; ++r) {
      const int64_t t = r % p.length;
      const T* e = p.table + p.ids[r] * C;
      const T* pos = p.positions + (p.position_offset + t) * C;
      T* out = p.out + r * C;
      const T scale = p.scale, *m = mask.data();
      if (drop) {
        philox::mask_row<T>(p.dropout, r / p.length, t, C, mask.data());
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) out[c] = (e[c] * scale + pos[c]) * m[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) out[c] = e[c] * scale + pos[c];
      }
    }
  });
}

template <typename T>
void embedding_backward(const EmbeddingBackwardParams<T>& p) {
  const int64_t C = p.channels, rows = p.batch * p.length;
  const bool drop = p.dropout.p > 0;
  if (!p.accumulate) std::fill(p.dtable, p.dtable + p.vocab * C, T(0));
  // Each thread owns a slice of the channels for every token: no two
  // threads add into the same element, and tokens are added in order.
#pragma omp parallel
  {
    const int threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t per = (C + threads - 1) / threads;
    const int64_t c0 = std::min(C, me * per), c1 = std::min(C, c0 + per);
    detail::AlignedBuffer<T> mask(drop ? C : 0);
    for (int64_t r = 0; r < rows && c0 < c1; ++r) {
      const int64_t id = p.ids[r];
      if (id == p.padding_id) continue;
      const T* d = p.dout + r * C;
      T* g = p.dtable + id * C;
      const T scale = p.scale, *m = mask.data();
      if (drop) {
        philox::mask_row<T>(p.dropout, r / p.length, r % p.length, C, mask.data());
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) g[c] += d[c] * scale * m[c];
      } else {
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) g[c] += d[c] * scale;
      }
    }
  }
}

template void embedding_forward<float>(const EmbeddingParams<float>&);
template void embedding_forward<double>(const EmbeddingParams<double>&);
template void embedding_backward<float>(const EmbeddingBackwardParams<float>&);
template void embedding_backward<double>(const EmbeddingBackwardParams<double>&);

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
