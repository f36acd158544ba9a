// See bias_relu_dropout_kernel.h.
//   forward:  one thread per Philox counter of a row (4 channels: the 4
//             words it draws decide them, cuda_common.cuh).
//   backward: no mask needed (out > 0 exactly where the element was kept and
//             positive): dh = dout / (1 - p) there, else 0. A block is 256
//             channels of one row group (every groups-th row); each thread
//             adds up its channel's dh over its rows into the group's partial
//             bias gradient, which column_sums adds up in a fixed order.
#include "ops/activation/cuda/bias_relu_dropout_kernel.h"

#include "ops/cuda_column_sums.h"
#include "ops/cuda_common.cuh"

namespace nmt::ops::cuda {
namespace {

constexpr int kThreads = 256;
// Backward row groups: enough blocks to fill a large GPU (about 512 in all),
// at least 8 rows a group.
constexpr int64_t kBackwardBlocks = 512;
constexpr int64_t kMinRowsPerGroup = 8;

int64_t backward_groups(int64_t rows, int64_t channels) {
  const int64_t blocks_x = (channels + kThreads - 1) / kThreads;
  int64_t groups = kBackwardBlocks / (blocks_x < 1 ? 1 : blocks_x);
  const int64_t by_rows = (rows + kMinRowsPerGroup - 1) / kMinRowsPerGroup;
  if (groups > by_rows) groups = by_rows;
  if (groups > 65535) groups = 65535;
  return groups < 1 ? 1 : groups;
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    bias_relu_dropout_forward_kernel(const BiasReluDropoutParams<float, U> p, int64_t counters, uint32_t threshold,
                                     float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= p.rows * counters) return;
  const int64_t r = i / counters, g = i % counters, F = p.channels;
  if (channel_of(g, 0) >= F) return;
  const DropoutWords d = dropout_words(p.dropout, r / p.positions, r % p.positions, g, threshold, scale);
  const U* h = p.h + r * F;
  U* out = p.out + r * F;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t c = channel_of(g, k);
    if (c < F) store_f(out + c, fmaxf(load_f(h + c) + p.bias[c], 0.0f) * d.m[k]);
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    bias_relu_dropout_backward_kernel(const BiasReluDropoutBackwardParams<float, U> p, float* partial, float scale) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x, F = p.channels;
  if (c >= F) return;
  float sum = 0;
  for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y) {
    const float d = load_f(p.out + r * F + c) > 0.0f ? load_f(p.dout + r * F + c) * scale : 0.0f;
    store_f(p.dh + r * F + c, d);
    sum += d;
  }
  partial[static_cast<int64_t>(blockIdx.y) * F + c] = sum;
}

template <typename U>
int forward(const BiasReluDropoutParams<float, U>& p, cudaStream_t stream) {
  const int64_t counters = (p.channels + 63) / 64 * 16;
  if (p.rows == 0 || p.channels == 0) return 0;
  bias_relu_dropout_forward_kernel<U><<<blocks_for(p.rows * counters, kThreads), kThreads, 0, stream>>>(
      p, counters, philox::keep_threshold(p.dropout.p), dropout_scale(p.dropout));
  return static_cast<int>(cudaGetLastError());
}

template <typename U>
int backward(const BiasReluDropoutBackwardParams<float, U>& p, float* scratch, cudaStream_t stream) {
  if (p.channels == 0) return 0;
  const int64_t groups = backward_groups(p.rows, p.channels);
  // The forward's multiplier: 1 / (1 - p) in double, rounded to float.
  const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p.p)));
  if (p.rows > 0) {
    const dim3 grid(blocks_for(p.channels, kThreads), static_cast<unsigned>(groups));
    bias_relu_dropout_backward_kernel<U><<<grid, kThreads, 0, stream>>>(p, scratch, scale);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return static_cast<int>(e);
  }
  return column_sums(scratch, p.rows > 0 ? groups : 0, p.channels, p.channels, p.dbias, nullptr, stream);
}

}  // namespace

int bias_relu_dropout_forward(const BiasReluDropoutParams<float, float>& p, cudaStream_t stream) {
  return forward(p, stream);
}
int bias_relu_dropout_forward(const BiasReluDropoutParams<float, bf16>& p, cudaStream_t stream) {
  return forward(p, stream);
}
int64_t bias_relu_dropout_backward_scratch_floats(int64_t rows, int64_t channels) {
  return backward_groups(rows, channels) * channels;
}
int bias_relu_dropout_backward(const BiasReluDropoutBackwardParams<float, float>& p, float* scratch,
                               cudaStream_t stream) {
  return backward(p, scratch, stream);
}
int bias_relu_dropout_backward(const BiasReluDropoutBackwardParams<float, bf16>& p, float* scratch,
                               cudaStream_t stream) {
  return backward(p, scratch, stream);
}

}  // namespace nmt::ops::cuda
