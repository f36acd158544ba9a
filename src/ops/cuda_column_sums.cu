// See cuda_column_sums.h. A block is 32 columns x 8 row groups: each thread
// adds every 8th partial row of its column, then the 8 group sums are added
// in shared memory, always in the same order.
#include <cuda_runtime.h>

#include "ops/cuda_column_sums.h"

namespace nmt::ops::cuda {
namespace {

constexpr int kCols = 32, kGroups = 8;

__global__ void __launch_bounds__(kCols * kGroups)
    column_sums_kernel(const float* partial, int64_t parts, int64_t cols, int64_t split, float* out0,
                       float* out1) {
  __shared__ float group_sum[kGroups][kCols];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  float sum = 0;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < parts; r += kGroups) sum += partial[r * cols + c];
  group_sum[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  float total = 0;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) total += group_sum[g][threadIdx.x];
  if (c < split) out0[c] = total;
  else out1[c - split] = total;
}

}  // namespace

int column_sums(const float* partial, int64_t parts, int64_t cols, int64_t split, float* out0, float* out1,
                cudaStream_t stream) {
  if (cols == 0) return 0;
  const unsigned blocks = static_cast<unsigned>((cols + kCols - 1) / kCols);
  column_sums_kernel<<<blocks, dim3(kCols, kGroups), 0, stream>>>(partial, parts, cols, split, out0, out1);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nmt::ops::cuda
