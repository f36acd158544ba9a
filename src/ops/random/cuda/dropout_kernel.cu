// Dropout multipliers on a GPU: one thread per Philox counter, each writing
// the (up to) 4 channels its 4 words decide (philox.h: channel
// 64 b + 16 k + l is word k of counter 16 b + l of its row and position).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "ops/random/cuda/dropout_kernel.h"

namespace nmt::ops::cuda {
namespace {

// 64 counters = 256 channels, the model width of the shipped configs: one block per row.
constexpr int kThreads = 64;

__device__ __forceinline__ void store(float* out, float v) { *out = v; }
__device__ __forceinline__ void store(bf16* out, float v) {
  const __nv_bfloat16 b = __float2bfloat16_rn(v);
  *reinterpret_cast<__nv_bfloat16*>(out) = b;
}

// grid: (counters of a row + kThreads - 1) / kThreads x min(rows, 65535);
// grid.y strides over the rows (batch * length).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    dropout_multipliers_kernel(const philox::DropoutStream s, int64_t rows, int64_t length,
                               int64_t channels, uint32_t threshold, float scale, T* out) {
  const int64_t counters = (channels + 63) / 64 * 16;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (g >= counters) return;
  for (int64_t row_pos = blockIdx.y; row_pos < rows; row_pos += gridDim.y) {
    const int64_t row = row_pos / length, position = row_pos % length;
    uint32_t w[4];
    philox::words(s, row, position, g, w);
    T* out_row = out + row_pos * channels;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t c = g / 16 * 64 + 16 * k + g % 16;
      if (c < channels) store(out_row + c, w[k] >= threshold ? scale : 0.0f);
    }
  }
}

template <typename T>
int launch(const philox::DropoutStream& s, int64_t batch, int64_t length, int64_t channels, T* out,
           cudaStream_t stream) {
  const int64_t rows = batch * length;
  if (rows == 0 || channels == 0) return 0;
  const int64_t counters = (channels + 63) / 64 * 16;
  const int64_t blocks_x = (counters + kThreads - 1) / kThreads;
  if (blocks_x > 0x7FFFFFFF) return static_cast<int>(cudaErrorInvalidValue);
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(rows < 65535 ? rows : 65535));
  const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(s.p)));
  dropout_multipliers_kernel<T><<<grid, kThreads, 0, stream>>>(s, rows, length, channels,
                                                               philox::keep_threshold(s.p), scale, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int dropout_multipliers(const philox::DropoutStream& s, int64_t batch, int64_t length, int64_t channels,
                        float* out, cudaStream_t stream) {
  return launch(s, batch, length, channels, out, stream);
}
int dropout_multipliers(const philox::DropoutStream& s, int64_t batch, int64_t length, int64_t channels,
                        bf16* out, cudaStream_t stream) {
  return launch(s, batch, length, channels, out, stream);
}

}  // namespace nmt::ops::cuda
