// See cross_entropy_kernel.h. One block of 256 threads per row (V values,
// read from L2 in each pass): pass 1 the row's max and sum, pass 2 the sum
// of exp(z - max), then the loss; pass 3 the gradient softmax - target.
#include "ops/cross_entropy/cuda/cross_entropy_kernel.h"

#include <math_constants.h>

#include "ops/cuda_common.cuh"

namespace nmt::ops::cuda {
namespace {

constexpr int kThreads = 256;

template <typename U>
__global__ void __launch_bounds__(kThreads) cross_entropy_kernel(const CrossEntropyParams<float, U> p) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, n = p.classes;
  const U* z = p.logits + r * p.logits_stride;
  U* grad = p.grad ? p.grad + r * n : nullptr;
  const int64_t y = p.labels[r];
  if (y == p.ignore_index) {
    if (threadIdx.x == 0) {
      p.loss[r] = 0;
      if (p.nll) p.nll[r] = 0;
    }
    if (grad)
      for (int64_t v = threadIdx.x; v < n; v += kThreads) store_f(grad + v, 0.0f);
    return;
  }
  // pass 1: max and sum of the logits
  float top = -CUDART_INF_F, sum = 0;
  for (int64_t v = threadIdx.x; v < n; v += kThreads) {
    const float x = load_f(z + v);
    top = fmaxf(top, x);
    sum += x;
  }
  top = block_reduce(top, scratch, true);
  sum = block_reduce(sum, scratch, false);
  // pass 2: sum of exp(z - max)
  float sumexp = 0;
  for (int64_t v = threadIdx.x; v < n; v += kThreads) sumexp += expf(load_f(z + v) - top);
  sumexp = block_reduce(sumexp, scratch, false);
  const float lse = top + logf(sumexp);
  const float e = static_cast<float>(p.smoothing), zy = load_f(z + y);
  if (threadIdx.x == 0) {
    p.loss[r] = (1 - e) * (lse - zy) + e * (lse - sum / static_cast<float>(n));
    if (p.nll) p.nll[r] = lse - zy;
  }
  if (!grad) return;
  // pass 3: softmax - smoothed target
  const float off = e / static_cast<float>(n);
  for (int64_t v = threadIdx.x; v < n; v += kThreads)
    store_f(grad + v, expf(load_f(z + v) - lse) - off - (v == y ? 1 - e : 0.0f));
}

template <typename U>
int run(const CrossEntropyParams<float, U>& p, cudaStream_t stream) {
  if (p.rows == 0) return 0;
  if (p.rows > 0x7FFFFFFF) return static_cast<int>(cudaErrorInvalidValue);
  cross_entropy_kernel<U><<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int cross_entropy(const CrossEntropyParams<float, float>& p, cudaStream_t stream) { return run(p, stream); }
int cross_entropy(const CrossEntropyParams<float, bf16>& p, cudaStream_t stream) { return run(p, stream); }

}  // namespace nmt::ops::cuda
