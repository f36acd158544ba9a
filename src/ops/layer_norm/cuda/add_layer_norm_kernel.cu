// See add_layer_norm_kernel.h. One warp per row (C values, read from L1/L2
// again in each pass), four rows a block. The channels of a row are visited
// 128 at a time in the order of the dropout stream: lane l draws Philox
// counter 16 (base / 64) + l, whose 4 words decide channels
// 64 (base / 64 + l / 16) + 16 k + l % 16 (cuda_common.cuh), so a lane
// draws each counter once and every lane keeps the same channels in every
// pass (it reads back only what it wrote itself: no barrier).
//   forward:  pass 1 s = x + dropout(y) and its sum; pass 2 the centred sum
//             of squares; pass 3 n = (s - mean) rstd gamma + beta.
//   backward: pass 1 the two row sums of dLayerNorm and this warp's partial
//             gamma / beta gradients; pass 2 dx and dy = dx * mask. The
//             warps' partial rows are then summed by column_sums.
#include "ops/layer_norm/cuda/add_layer_norm_kernel.h"

#include "ops/cuda_column_sums.h"
#include "ops/cuda_common.cuh"

namespace nmt::ops::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
// The backward's warps: each owns rows w, w + warps, ... and one partial
// row of the parameter gradients (at most this many, to keep the scratch
// and the column sums small).
constexpr int64_t kMaxBackwardWarps = 1024;
constexpr int64_t kRowsPerBackwardWarp = 4;

int64_t backward_warps(int64_t rows) {
  const int64_t w = (rows + kRowsPerBackwardWarp - 1) / kRowsPerBackwardWarp;
  return w < 1 ? 1 : (w > kMaxBackwardWarps ? kMaxBackwardWarps : w);
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    add_layer_norm_forward_kernel(const AddLayerNormForwardParams<float, U> p, uint32_t threshold, float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= p.rows) return;
  const int64_t C = p.channels;
  const int64_t row = r / p.positions, position = r % p.positions;
  const float* x = p.x + r * C;
  const U* y = p.y ? p.y + r * C : nullptr;
  float* s = y ? p.s + r * C : nullptr;
  // pass 1: s = x + dropout(y), and its sum
  float sum = 0;
  for (int64_t base = 0; base < C; base += 128) {
    const int64_t g = base / 64 * 16 + lane;
    if (channel_of(g, 0) >= C) continue;
    if (y) {
      const DropoutWords d = dropout_words(p.dropout, row, position, g, threshold, scale);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t c = channel_of(g, k);
        if (c >= C) continue;
        const float v = x[c] + load_f(y + c) * d.m[k];
        s[c] = v;
        sum += v;
      }
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t c = channel_of(g, k);
        if (c < C) sum += x[c];
      }
    }
  }
  const float mean = warp_sum(sum) / static_cast<float>(C);
  // pass 2: variance around the mean (two passes: no cancellation)
  const float* sv = y ? s : x;
  float sq = 0;
  for (int64_t base = 0; base < C; base += 128) {
    const int64_t g = base / 64 * 16 + lane;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t c = channel_of(g, k);
      if (c < C) sq += (sv[c] - mean) * (sv[c] - mean);
    }
  }
  const float rstd = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + static_cast<float>(p.eps));
  if (lane == 0) p.mean[r] = mean, p.rstd[r] = rstd;
  // pass 3: n = normalized * gamma + beta
  U* n = p.n + r * C;
  for (int64_t base = 0; base < C; base += 128) {
    const int64_t g = base / 64 * 16 + lane;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t c = channel_of(g, k);
      if (c < C) store_f(n + c, (sv[c] - mean) * rstd * p.gamma[c] + p.beta[c]);
    }
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    add_layer_norm_backward_kernel(const AddLayerNormBackwardParams<float, U> p, float* partial, int64_t warps,
                                   uint32_t threshold, float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (w >= warps) return;
  const int64_t C = p.channels;
  const float inv_c = 1.0f / static_cast<float>(C);
  const bool drop = p.dy != nullptr && p.dropout.p > 0;
  float* dgamma = partial + w * 2 * C;  // this warp's partial rows: dgamma, then dbeta
  float* dbeta = dgamma + C;
  for (int64_t base = 0; base < C; base += 128) {
    const int64_t g = base / 64 * 16 + lane;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t c = channel_of(g, k);
      if (c < C) dgamma[c] = 0, dbeta[c] = 0;
    }
  }
  for (int64_t r = w; r < p.rows; r += warps) {
    const float* s = p.s + r * C;
    const U* dn = p.dn + r * C;
    const float mean = p.mean[r], rstd = p.rstd[r];
    // pass 1: the row sums dLayerNorm needs; gamma/beta gradients
    float sum_g = 0, sum_gx = 0;
    for (int64_t base = 0; base < C; base += 128) {
      const int64_t g = base / 64 * 16 + lane;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t c = channel_of(g, k);
        if (c >= C) continue;
        const float d = load_f(dn + c);
        const float xhat = (s[c] - mean) * rstd;
        const float gg = __fmul_rn(d, p.gamma[c]);  // rounded as in pass 2 (no FMA there)
        sum_g += gg;
        sum_gx += gg * xhat;
        dgamma[c] += d * xhat;
        dbeta[c] += d;
      }
    }
    const float a = warp_sum(sum_g) * inv_c, b = warp_sum(sum_gx) * inv_c;
    // pass 2: dx = ds + rstd (g - mean(g) - xhat mean(g xhat)); dy = dx * mask
    float* dx = p.dx + r * C;
    const float* ds = p.ds ? p.ds + r * C : nullptr;
    U* dy = p.dy ? p.dy + r * C : nullptr;
    for (int64_t base = 0; base < C; base += 128) {
      const int64_t g = base / 64 * 16 + lane;
      if (channel_of(g, 0) >= C) continue;
      DropoutWords m{{1.0f, 1.0f, 1.0f, 1.0f}};
      if (drop) m = dropout_words(p.dropout, r / p.positions, r % p.positions, g, threshold, scale);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t c = channel_of(g, k);
        if (c >= C) continue;
        const float xhat = (s[c] - mean) * rstd;
        // g - mean(g) with g rounded exactly as pass 1 summed it: a product
        // left to contract into an FMA would keep the bits the sum lost, and
        // at C = 1 (g = mean(g)) they came out times rstd (316 at eps 1e-5).
        const float gg = __fmul_rn(load_f(dn + c), p.gamma[c]);
        const float v = (ds ? ds[c] : 0.0f) + rstd * ((gg - a) - xhat * b);
        dx[c] = v;
        if (dy) store_f(dy + c, v * m.m[k]);
      }
    }
  }
}

template <typename U>
int forward(const AddLayerNormForwardParams<float, U>& p, cudaStream_t stream) {
  if (p.rows == 0) return 0;
  add_layer_norm_forward_kernel<U><<<blocks_for(p.rows, kWarps), kThreads, 0, stream>>>(
      p, philox::keep_threshold(p.dropout.p), dropout_scale(p.dropout));
  return static_cast<int>(cudaGetLastError());
}

template <typename U>
int backward(const AddLayerNormBackwardParams<float, U>& p, float* scratch, cudaStream_t stream) {
  const int64_t warps = backward_warps(p.rows);
  if (p.rows > 0) {
    add_layer_norm_backward_kernel<U><<<blocks_for(warps, kWarps), kThreads, 0, stream>>>(
        p, scratch, warps, philox::keep_threshold(p.dropout.p), dropout_scale(p.dropout));
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return static_cast<int>(e);
  }
  return column_sums(scratch, p.rows > 0 ? warps : 0, 2 * p.channels, p.channels, p.dgamma, p.dbeta, stream);
}

}  // namespace

int add_layer_norm_forward(const AddLayerNormForwardParams<float, float>& p, cudaStream_t stream) {
  return forward(p, stream);
}
int add_layer_norm_forward(const AddLayerNormForwardParams<float, bf16>& p, cudaStream_t stream) {
  return forward(p, stream);
}

int64_t add_layer_norm_backward_scratch_floats(int64_t rows, int64_t channels) {
  return backward_warps(rows) * 2 * channels;
}
int add_layer_norm_backward(const AddLayerNormBackwardParams<float, float>& p, float* scratch,
                            cudaStream_t stream) {
  return backward(p, scratch, stream);
}
int add_layer_norm_backward(const AddLayerNormBackwardParams<float, bf16>& p, float* scratch,
                            cudaStream_t stream) {
  return backward(p, scratch, stream);
}

}  // namespace nmt::ops::cuda
