// Device helpers shared by the fused training kernels (ops/*/cuda/*.cu):
// loads and stores in float whatever the storage type (float or bf16, the
// layout of ops/bf16.h), warp sums, and the dropout multiplier of one
// channel from the counter-based stream of ops/random/philox.h, so that a
// GPU draws exactly the masks the CPU kernels and the ATen reference draw.
// nvcc only; no LibTorch header.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/bf16.h"
#include "ops/random/philox.h"

namespace nmt::ops::cuda {

__device__ __forceinline__ float load_f(const float* p) { return *p; }
__device__ __forceinline__ float load_f(const bf16* p) {
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
}
__device__ __forceinline__ void store_f(float* p, float v) { *p = v; }
// Round to nearest even, as ops::to_bf16 and LibTorch do.
__device__ __forceinline__ void store_f(bf16* p, float v) {
  *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

// Sum and max over a block of blockDim.x threads (a multiple of 32, at most
// 1024), every thread getting the result; `scratch` holds 32 floats of
// shared memory, free again when the call returns.
__device__ __forceinline__ float block_reduce(float v, float* scratch, bool is_max) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = is_max ? warp_max(v) : warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = scratch[0];
  for (int w = 1; w < warps; ++w) total = is_max ? fmaxf(total, scratch[w]) : total + scratch[w];
  __syncthreads();
  return total;
}

// The channels one Philox counter decides (philox.h): counter g covers
// channels 64 (g / 16) + 16 k + g % 16 for k = 0..3, so a thread that draws
// counter g applies its 4 words to those 4 channels.
__device__ __forceinline__ int64_t channel_of(int64_t g, int k) { return g / 16 * 64 + 16 * k + g % 16; }

// The 4 multipliers (0 or scale) of counter g at (row, position); all
// `scale` (1) when the stream has p = 0.
struct DropoutWords {
  float m[4];
};
__device__ __forceinline__ DropoutWords dropout_words(const philox::DropoutStream& s, int64_t row,
                                                      int64_t position, int64_t g, uint32_t threshold,
                                                      float scale) {
  DropoutWords d;
  if (s.p <= 0) {
#pragma unroll
    for (int k = 0; k < 4; ++k) d.m[k] = 1.0f;
    return d;
  }
  uint32_t w[4];
  philox::words(s, row, position, g, w);
#pragma unroll
  for (int k = 0; k < 4; ++k) d.m[k] = w[k] >= threshold ? scale : 0.0f;
  return d;
}

// The multiplier's scale as the CPU kernels and the ATen reference compute
// it: 1 / (1 - p) in double, p rounded to float first.
inline float dropout_scale(const philox::DropoutStream& s) {
  return s.p > 0 ? static_cast<float>(1.0 / (1.0 - static_cast<double>(s.p))) : 1.0f;
}

inline unsigned blocks_for(int64_t work, int threads) {
  const int64_t b = (work + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 0x7FFFFFFF ? 0x7FFFFFFF : b));
}

}  // namespace nmt::ops::cuda
