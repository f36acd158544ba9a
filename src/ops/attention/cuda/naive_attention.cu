// Naive float32 attention on CUDA: materializes the scores / probabilities
// [B, H, Tq, Tk] and keeps them for the backward. Written for clarity (it is
// the reference the flash kernels are checked against), not for speed:
// every product is one small shared-memory-tiled batched GEMM kernel, and
// the row-wise steps (softmax, dS) use one warp per row.
//
// Forward:  S = scale * Q K^T (masked -> -inf), P = softmax_rows(S), O = P V.
// Backward: dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)),
//           dQ = scale * dS K, dK = scale * dS^T Q.
#include "ops/attention/cuda/attention_cuda.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace nmt::ops::cuda {
namespace {

constexpr int kTile = 16;  // GEMM tile edge: 16 x 16 outputs, one per thread
constexpr int kWarpSize = 32;
constexpr int kRowWarps = 8;                  // row kernels: 8 warps per block, one row per warp
constexpr int kMaxGridZ = 65535;              // hardware limit on gridDim.z (and gridDim.y)
constexpr int64_t kMaxRowBlocks = 65535 * 8;  // row kernels loop past this many blocks

// One operand of a batched GEMM, seen as a [rows, cols] matrix per head:
// element (r, c) of head (b, h) lives at
//   ptr[b * stride_b + h * stride_h + r * stride_r + c * stride_c].
// Transposes are expressed by swapping stride_r / stride_c, so no copy is
// ever needed.
struct MatView {
  const float* ptr;
  int64_t stride_b, stride_h, stride_r, stride_c;
};

// What the GEMM does with each finished dot product.
enum class Epilogue {
  kPlain,       // c = alpha * acc
  kScoresMask,  // c = alpha * acc, or -inf where the (query, key) pair is masked
};

// Loads the kTile x kTile block of `view` starting at (r0, c0) into `tile`
// (zero outside [rows, cols]). Threads are mapped so that threadIdx.x walks
// the unit-stride dimension: global loads stay coalesced for both normal and
// transposed views. The +1 column padding of `tile` avoids bank conflicts
// for the transposed store.
__device__ void load_gemm_tile(float (&tile)[kTile][kTile + 1], const float* base,
                               const MatView& view, int64_t r0, int64_t c0, int64_t rows,
                               int64_t cols) {
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const bool column_major = view.stride_r == 1 && view.stride_c != 1;
  const int tr = column_major ? tx : ty;  // row inside the tile
  const int tc = column_major ? ty : tx;  // column inside the tile
  const int64_t r = r0 + tr;
  const int64_t c = c0 + tc;
  tile[tr][tc] = (r < rows && c < cols) ? base[r * view.stride_r + c * view.stride_c] : 0.0f;
}

// Batched C(m, n) = alpha * sum_k A(m, k) * B(k, n) for every (b, h).
// c: [B*H, m, n] contiguous. Block (kTile, kTile) computes one output tile;
// blockIdx.z strides over the B*H heads.
// For kScoresMask, m indexes queries (i) and n keys (j): masked pairs are
// j >= key_lengths[b], or j > i when causal.
template <Epilogue kEpilogue>
__global__ void batched_gemm_kernel(MatView a, MatView bm, float* c, int64_t heads,
                                    int64_t bh_count, int64_t m, int64_t n, int64_t k_dim,
                                    float alpha, const int64_t* key_lengths, bool causal) {
  __shared__ float a_tile[kTile][kTile + 1];  // a_tile[row of C][k]
  __shared__ float b_tile[kTile][kTile + 1];  // b_tile[k][column of C]
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + ty;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;

  for (int64_t bh = blockIdx.z; bh < bh_count; bh += gridDim.z) {
    const int64_t b = bh / heads;
    const int64_t h = bh % heads;
    const float* a_base = a.ptr + b * a.stride_b + h * a.stride_h;
    const float* b_base = bm.ptr + b * bm.stride_b + h * bm.stride_h;

    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < k_dim; k0 += kTile) {
      load_gemm_tile(a_tile, a_base, a, static_cast<int64_t>(blockIdx.y) * kTile, k0, m, k_dim);
      load_gemm_tile(b_tile, b_base, bm, k0, static_cast<int64_t>(blockIdx.x) * kTile, k_dim, n);
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTile; ++kk) acc = fmaf(a_tile[ty][kk], b_tile[kk][tx], acc);
      __syncthreads();  // before the next k step overwrites the tiles
    }

    if (row < m && col < n) {
      float value = alpha * acc;
      if constexpr (kEpilogue == Epilogue::kScoresMask) {
        const int64_t key_len = key_lengths ? key_lengths[b] : n;
        if (col >= key_len || (causal && col > row)) value = -INFINITY;
      }
      c[(bh * m + row) * n + col] = value;
    }
  }
}

template <Epilogue kEpilogue>
void launch_gemm(const MatView& a, const MatView& b, float* c, int64_t heads, int64_t bh_count,
                 int64_t m, int64_t n, int64_t k_dim, float alpha, const int64_t* key_lengths,
                 bool causal, cudaStream_t stream) {
  if (m == 0 || n == 0 || bh_count == 0) return;  // nothing to write
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile),
                  static_cast<unsigned>((m + kTile - 1) / kTile),
                  static_cast<unsigned>(bh_count < kMaxGridZ ? bh_count : kMaxGridZ));
  batched_gemm_kernel<kEpilogue><<<grid, block, 0, stream>>>(a, b, c, heads, bh_count, m, n, k_dim,
                                                             alpha, key_lengths, causal);
}

__device__ float warp_sum(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ float warp_max(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// In-place row softmax of the masked scores.
// probs: [rows, row_len] contiguous (rows = B*H*Tq), lse: [rows] or null.
// Masked entries are -inf and become exactly 0; a row with no visible key
// (max = -inf) becomes all zeros with lse = -inf instead of NaN.
__global__ void softmax_rows_kernel(float* probs, float* lse, int64_t rows, int64_t row_len) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / kWarpSize;
  const int64_t warp_step = static_cast<int64_t>(gridDim.x) * kRowWarps;
  for (int64_t row = warp; row < rows; row += warp_step) {
    float* x = probs + row * row_len;
    float row_max = -INFINITY;
    for (int64_t j = lane; j < row_len; j += kWarpSize) row_max = fmaxf(row_max, x[j]);
    row_max = warp_max(row_max);

    if (row_max == -INFINITY) {  // no visible key: zeros, not exp(-inf - -inf) = NaN
      for (int64_t j = lane; j < row_len; j += kWarpSize) x[j] = 0.0f;
      if (lse != nullptr && lane == 0) lse[row] = -INFINITY;
      continue;
    }

    float sum = 0.0f;
    for (int64_t j = lane; j < row_len; j += kWarpSize) sum += expf(x[j] - row_max);
    sum = warp_sum(sum);
    const float inv_sum = 1.0f / sum;  // sum >= 1: the max element contributes exp(0)
    for (int64_t j = lane; j < row_len; j += kWarpSize) x[j] = expf(x[j] - row_max) * inv_sum;
    if (lse != nullptr && lane == 0) lse[row] = row_max + logf(sum);
  }
}

// In place: dS = P * (dP - rowsum(dP * P)) (softmax backward per row).
// probs, dscratch: [rows, row_len] contiguous; dscratch holds dP on entry.
// Masked entries have P = 0, hence dS = 0 there (and for empty rows).
__global__ void softmax_backward_rows_kernel(const float* probs, float* dscratch, int64_t rows,
                                             int64_t row_len) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / kWarpSize;
  const int64_t warp_step = static_cast<int64_t>(gridDim.x) * kRowWarps;
  for (int64_t row = warp; row < rows; row += warp_step) {
    const float* prob = probs + row * row_len;
    float* grad = dscratch + row * row_len;
    float dot = 0.0f;
    for (int64_t j = lane; j < row_len; j += kWarpSize) dot = fmaf(grad[j], prob[j], dot);
    dot = warp_sum(dot);
    for (int64_t j = lane; j < row_len; j += kWarpSize) grad[j] = prob[j] * (grad[j] - dot);
  }
}

unsigned row_blocks(int64_t rows) {
  const int64_t blocks = (rows + kRowWarps - 1) / kRowWarps;
  return static_cast<unsigned>(blocks < kMaxRowBlocks ? blocks : kMaxRowBlocks);
}

// gridDim.y carries the row tiles of every GEMM: refuse shapes past it.
bool rows_fit_grid(int64_t rows) { return (rows + kTile - 1) / kTile <= kMaxGridZ; }

}  // namespace

int naive_attention_forward(const AttentionForwardParams<float>& p, cudaStream_t stream) {
  const int64_t bh_count = p.batch * p.heads;
  const int64_t tq = p.q_len;
  const int64_t tk = p.k_len;
  const int64_t dim = p.head_dim;
  if (bh_count == 0 || tq == 0) return 0;
  // The probabilities are the naive path's scratch and are kept for the backward.
  if ((p.probs == nullptr && tk > 0) || p.o == nullptr) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (!rows_fit_grid(tq) || !rows_fit_grid(tk)) return static_cast<int>(cudaErrorInvalidValue);

  // pass 1: scores. probs[b, h, i, j] = scale * q_i . k_j, or -inf if masked.
  // A = Q: [Tq, D]; B(d, j) = K[j, d]: K^T via swapped strides.
  const MatView q_view{p.q, p.q_stride_b, p.q_stride_h, p.q_stride_t, 1};
  const MatView kt_view{p.k, p.k_stride_b, p.k_stride_h, 1, p.k_stride_t};
  launch_gemm<Epilogue::kScoresMask>(q_view, kt_view, p.probs, p.heads, bh_count, tq, tk, dim,
                                     p.scale, p.key_lengths, p.causal, stream);

  // pass 2: row softmax in place (and logsumexp when requested).
  const int64_t rows = bh_count * tq;
  // With Tk = 0 the kernel still runs: every row is empty and gets lse = -inf.
  softmax_rows_kernel<<<row_blocks(rows), kRowWarps * kWarpSize, 0, stream>>>(p.probs, p.lse, rows,
                                                                              tk);

  // pass 3: O = P V. A = P: [Tq, Tk] contiguous; B = V: [Tk, D].
  const MatView p_view{p.probs, p.heads * tq * tk, tq * tk, tk, 1};
  const MatView v_view{p.v, p.v_stride_b, p.v_stride_h, p.v_stride_t, 1};
  launch_gemm<Epilogue::kPlain>(p_view, v_view, p.o, p.heads, bh_count, tq, dim, tk, 1.0f, nullptr,
                                false, stream);
  return static_cast<int>(cudaGetLastError());
}

int naive_attention_backward(const AttentionBackwardParams<float>& p, float* dscratch,
                             cudaStream_t stream) {
  const int64_t bh_count = p.batch * p.heads;
  const int64_t tq = p.q_len;
  const int64_t tk = p.k_len;
  const int64_t dim = p.head_dim;
  if (bh_count == 0) return 0;
  if (tk > 0 && (p.probs == nullptr || dscratch == nullptr)) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (!rows_fit_grid(tq) || !rows_fit_grid(tk)) return static_cast<int>(cudaErrorInvalidValue);

  // Contiguous [B, H, T, *] views of the caller's probs / dO / dS.
  const MatView pt_view{p.probs, p.heads * tq * tk, tq * tk, 1, tk};        // P^T: [Tk, Tq]
  const MatView ds_view{dscratch, p.heads * tq * tk, tq * tk, tk, 1};       // dS: [Tq, Tk]
  const MatView dst_view{dscratch, p.heads * tq * tk, tq * tk, 1, tk};      // dS^T: [Tk, Tq]
  const MatView do_view{p.d_o, p.heads * tq * dim, tq * dim, dim, 1};       // dO: [Tq, D]
  const MatView q_view{p.q, p.q_stride_b, p.q_stride_h, p.q_stride_t, 1};   // Q: [Tq, D]
  const MatView k_view{p.k, p.k_stride_b, p.k_stride_h, p.k_stride_t, 1};   // K: [Tk, D]
  const MatView vt_view{p.v, p.v_stride_b, p.v_stride_h, 1, p.v_stride_t};  // V^T: [D, Tk]

  // pass 1: dV = P^T dO  ([Tk, Tq] x [Tq, D]).
  launch_gemm<Epilogue::kPlain>(pt_view, do_view, p.dv, p.heads, bh_count, tk, dim, tq, 1.0f,
                                nullptr, false, stream);
  // pass 2: dP = dO V^T  ([Tq, D] x [D, Tk]) into the scratch.
  launch_gemm<Epilogue::kPlain>(do_view, vt_view, dscratch, p.heads, bh_count, tq, tk, dim, 1.0f,
                                nullptr, false, stream);
  // pass 3: dS = P * (dP - rowsum(dP * P)), in place in the scratch.
  const int64_t rows = bh_count * tq;
  if (rows > 0 && tk > 0) {
    softmax_backward_rows_kernel<<<row_blocks(rows), kRowWarps * kWarpSize, 0, stream>>>(
        p.probs, dscratch, rows, tk);
  }
  // pass 4: dQ = scale * dS K  ([Tq, Tk] x [Tk, D]).
  launch_gemm<Epilogue::kPlain>(ds_view, k_view, p.dq, p.heads, bh_count, tq, dim, tk, p.scale,
                                nullptr, false, stream);
  // pass 5: dK = scale * dS^T Q  ([Tk, Tq] x [Tq, D]).
  launch_gemm<Epilogue::kPlain>(dst_view, q_view, p.dk, p.heads, bh_count, tk, dim, tq, p.scale,
                                nullptr, false, stream);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nmt::ops::cuda
