// See embedding_kernel.h. One thread per Philox counter of a token (4
// channels, cuda_common.cuh), forward and backward. Ids outside the table
// (which the callers rule out) read nothing: their rows come out NaN.
#include "ops/embedding/cuda/embedding_kernel.h"

#include <math_constants.h>

#include "ops/cuda_common.cuh"

namespace nmt::ops::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    embedding_forward_kernel(const EmbeddingParams<float> p, int64_t counters, uint32_t threshold, float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= p.batch * p.length * counters) return;
  const int64_t r = i / counters, g = i % counters, C = p.channels, t = r % p.length;
  if (channel_of(g, 0) >= C) return;
  const int64_t id = p.ids[r];
  float* out = p.out + r * C;
  if (id < 0 || id >= p.vocab) {  // never read outside the table: a NaN row says it
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (channel_of(g, k) < C) out[channel_of(g, k)] = CUDART_NAN_F;
    return;
  }
  const DropoutWords d = dropout_words(p.dropout, r / p.length, t, g, threshold, scale);
  const float* e = p.table + id * C;
  const float* pos = p.positions + (p.position_offset + t) * C;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t c = channel_of(g, k);
    if (c < C) out[c] = __fadd_rn(__fmul_rn(e[c], p.scale), pos[c]) * d.m[k];
  }
}

__global__ void __launch_bounds__(kThreads)
    embedding_backward_kernel(const EmbeddingBackwardParams<float> p, int64_t counters, uint32_t threshold,
                              float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= p.batch * p.length * counters) return;
  const int64_t r = i / counters, g = i % counters, C = p.channels;
  const int64_t id = p.ids[r];
  if (id == p.padding_id || id < 0 || id >= p.vocab || channel_of(g, 0) >= C) return;
  const DropoutWords d = dropout_words(p.dropout, r / p.length, r % p.length, g, threshold, scale);
  const float* dout = p.dout + r * C;
  float* dtable = p.dtable + id * C;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t c = channel_of(g, k);
    if (c < C && d.m[k] != 0.0f) atomicAdd(dtable + c, dout[c] * p.scale * d.m[k]);
  }
}

}  // namespace

int embedding_forward(const EmbeddingParams<float>& p, cudaStream_t stream) {
  const int64_t counters = (p.channels + 63) / 64 * 16, work = p.batch * p.length * counters;
  if (work == 0) return 0;
  embedding_forward_kernel<<<blocks_for(work, kThreads), kThreads, 0, stream>>>(
      p, counters, philox::keep_threshold(p.dropout.p), dropout_scale(p.dropout));
  return static_cast<int>(cudaGetLastError());
}

int embedding_backward(const EmbeddingBackwardParams<float>& p, cudaStream_t stream) {
  const int64_t counters = (p.channels + 63) / 64 * 16, work = p.batch * p.length * counters;
  if (work == 0) return 0;
  embedding_backward_kernel<<<blocks_for(work, kThreads), kThreads, 0, stream>>>(
      p, counters, philox::keep_threshold(p.dropout.p), dropout_scale(p.dropout));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nmt::ops::cuda
