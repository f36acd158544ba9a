// See adam_kernel.h. One thread per 4 elements (16-byte loads where the
// buffers allow, which FlatAdam's 64-element alignment gives), scalars
// computed once on the host in double and rounded, as on the CPU.
#include "ops/adam/cuda/adam_kernel.h"

#include <cuda_runtime.h>

#include <cmath>

#include "ops/cuda_common.cuh"

namespace nmt::ops::cuda {
namespace {

constexpr int kThreads = 256;

struct AdamScalars {
  float b1, b2, one_minus_b1, one_minus_b2, step_size, sqrt_bc2, eps, wd;
};

__device__ __forceinline__ void update(float& param, float grad, float& m, float& v, const AdamScalars s,
                                       float scale) {
  float g = grad * scale;
  if (s.wd != 0) g = g + s.wd * param;
  m = m * s.b1 + s.one_minus_b1 * g;
  v = v * s.b2 + s.one_minus_b2 * g * g;
  const float denom = sqrtf(v) / s.sqrt_bc2 + s.eps;
  param = param - s.step_size * (m / denom);
}

__global__ void __launch_bounds__(kThreads)
    adam_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t count,
                const AdamScalars s, const float* grad_scale) {
  const float scale = *grad_scale;
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * 4;
  if (i + 4 <= count) {
    float4 p = *reinterpret_cast<const float4*>(param + i), g = *reinterpret_cast<const float4*>(grad + i);
    float4 m = *reinterpret_cast<const float4*>(exp_avg + i), v = *reinterpret_cast<const float4*>(exp_avg_sq + i);
    update(p.x, g.x, m.x, v.x, s, scale);
    update(p.y, g.y, m.y, v.y, s, scale);
    update(p.z, g.z, m.z, v.z, s, scale);
    update(p.w, g.w, m.w, v.w, s, scale);
    *reinterpret_cast<float4*>(param + i) = p;
    *reinterpret_cast<float4*>(exp_avg + i) = m;
    *reinterpret_cast<float4*>(exp_avg_sq + i) = v;
    return;
  }
  for (int64_t j = i; j < count; ++j) update(param[j], grad[j], exp_avg[j], exp_avg_sq[j], s, scale);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

int adam_step(const AdamParams<float>& p, const float* grad_scale, cudaStream_t stream) {
  if (p.count == 0) return 0;
  if (!aligned16(p.param) || !aligned16(p.grad) || !aligned16(p.exp_avg) || !aligned16(p.exp_avg_sq))
    return static_cast<int>(cudaErrorMisalignedAddress);
  // Scalars in double, then rounded once, as LibTorch does with its Scalars.
  const double bc1 = 1 - std::pow(p.beta1, static_cast<double>(p.step));
  const double bc2 = 1 - std::pow(p.beta2, static_cast<double>(p.step));
  AdamScalars s;
  s.b1 = static_cast<float>(p.beta1), s.b2 = static_cast<float>(p.beta2);
  s.one_minus_b1 = static_cast<float>(1 - p.beta1), s.one_minus_b2 = static_cast<float>(1 - p.beta2);
  s.step_size = static_cast<float>(p.lr / bc1);
  s.sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  s.eps = static_cast<float>(p.eps), s.wd = static_cast<float>(p.weight_decay);
  adam_kernel<<<blocks_for((p.count + 3) / 4, kThreads), kThreads, 0, stream>>>(p.param, p.grad, p.exp_avg,
                                                                                p.exp_avg_sq, p.count, s, grad_scale);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nmt::ops::cuda
