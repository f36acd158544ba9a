// FlashAttention-2 forward for bf16 inputs on tensor cores (sm_80 and later):
// mma.sync m16n8k16 with bf16 operands and float32 accumulators.
//
// One thread block per (b, h, query tile of kBr = 128 rows), 4 warps; warp w
// owns 2 m-tiles of 16 query rows. Per key tile of kBc keys (64, 32 at D = 128):
//   pass 1: S = Q K^T. At D <= 64 the warp's Q fragments were loaded once
//           (ldmatrix) and stay in registers; at D = 128 they are read from
//           shared memory one k16 step at a time. K fragments come from shared memory with
//           ldmatrix, each x4 load feeding two n8 tiles of every m-tile of
//           the warp. S lives in the mma's
//           accumulator layout: lane (g = lane / 4, t = lane % 4) holds rows
//           g and g + 8, keys 8n + 2t and 8n + 2t + 1 of every n8 tile n.
//   pass 2: mask + online softmax in base 2, row statistics per lane, reduced
//           over the 4 lanes of a row (2 shuffles).
//   pass 3: O += P V. The accumulator layout of two adjacent n8 tiles of P is
//           the A-operand layout of one k16 step, so P goes from registers to
//           the next mma as bf16 pairs without touching shared memory; V is
//           read with ldmatrix.trans, which delivers the B operand of
//           row-major [key][dim] V directly.
// K and V tiles stream through shared memory with cp.async, as in the
// float32 kernel: K_{j+1} loads during P V, V_{j+1} during the next Q K^T.
// Causal launches place blocks with the heads fastest and the longest query
// tiles first (FwdTilings below): the longest blocks of every head start
// before any short one, so the short ones fill the tail.
// Epilogue: O / rowsum as bf16, logsumexp (natural log) as float32; rows with
// no visible key get O = 0 and lse = -inf.
//
// Numerics: products and sums in float32; exponentials with ex2.approx;
// P is rounded to bf16 before P V, as in FlashAttention-2 (the row sums use
// the unrounded P).
//
// Shapes: head dims up to 128 in multiples of 8 (padded to 64 or 128 with
// zero columns), rows 16-byte aligned; flash_attention_forward_bf16_supported
// says whether a call qualifies. Others go through the float32 kernels.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "ops/attention/cuda/attention_cuda.h"
#include "ops/attention/cuda/flash_kernel_traits.h"
#include "ops/attention/cuda/flash_mma.cuh"
#include "ops/attention/cuda/flash_tile.cuh"

namespace nmt::ops::cuda {
namespace {

using flash::cp_async_commit;
using flash::cp_async_wait;
using namespace flash::mma;

constexpr float kLn2 = 0.6931471805599453f;

template <int kD, class Tiling = flash::FwdTiling<>>
using Traits = flash::FlashFwdMmaTraits<kD, flash::kTargetArch, Tiling>;

// ---------------------------------------------------------------------------
// The kernel. grid.x = B * H * n_qblocks (query block fastest, or the head
// with kHeadsFastest when causal); block = Tr::kThreads.
// Long, on purpose: the passes below share the accumulators and row
// statistics held in registers from the first key tile to the epilogue; as
// separate functions they would pass them all by reference and read out of
// order. Each pass is narrated where it starts.
// ---------------------------------------------------------------------------
template <int kD, class Tiling>
__global__ void __launch_bounds__(Traits<kD, Tiling>::kThreads, Traits<kD, Tiling>::kMinBlocksPerSm)
    flash_forward_bf16_kernel(const AttentionForwardParams<bf16, float> p, int n_qblocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Tr = Traits<kD, Tiling>;
  constexpr int kBr = Tr::kBr;
  constexpr int kBc = Tr::kBc;
  constexpr int kStride = Tr::kStride;

  extern __shared__ uint4 smem_u4[];
  bf16* smem = reinterpret_cast<bf16*>(smem_u4);
  bf16* q_s = smem + Tr::kSmemQ;  // q_s: [kBr][kStride]
  bf16* k_s = smem + Tr::kSmemK;  // k_s: [kBc][kStride]
  bf16* v_s = smem + Tr::kSmemV;  // v_s: [kBc][kStride]

  const flash::BlockPlace at =
      flash::block_place(p, n_qblocks, /*longest_first=*/p.causal, Tr::kHeadsFastest && p.causal);
  const int64_t bh = at.bh, b = at.b, h = at.h;
  const int tq = static_cast<int>(p.q_len);
  const int head_dim = static_cast<int>(p.head_dim);
  const bool causal = p.causal;
  const int q0 = at.block * kBr;

  // This head's q: [Tq, D], k / v: [Tk, D]; row strides p.{q,k,v}_stride_t.
  const bf16* q_head = p.q + b * p.q_stride_b + h * p.q_stride_h;
  const bf16* k_head = p.k + b * p.k_stride_b + h * p.k_stride_h;
  const bf16* v_head = p.v + b * p.v_stride_b + h * p.v_stride_h;

  const int key_len = flash::key_length(p, b);
  const int n_kblocks = (flash::visible_keys(key_len, causal, q0, kBr, tq) + kBc - 1) / kBc;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;  // accumulator rows g and g + 8 of the warp's m-tile
  const int t = lane % 4;  // accumulator columns 2t and 2t + 1 of each n8 tile

  // Prologue: three copy groups, Q | K_0 | V_0.
  load_tile_bf16<kBr, Tr>(q_s, q_head, p.q_stride_t, q0, tq, head_dim, tid);
  cp_async_commit();
  if (n_kblocks > 0) load_tile_bf16<kBc, Tr>(k_s, k_head, p.k_stride_t, 0, key_len, head_dim, tid);
  cp_async_commit();
  if (n_kblocks > 0) load_tile_bf16<kBc, Tr>(v_s, v_head, p.v_stride_t, 0, key_len, head_dim, tid);
  cp_async_commit();
  cp_async_wait<2>();
  __syncthreads();

  // The warp's Q as A fragments, per m-tile and k16 step: matrices (rows
  // 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15,
  // cols 8-15) of the m-tile. Loaded once when they stay in registers (D <=
  // 64); otherwise one k16 step at a time in pass 1, from q_s, which holds Q
  // for the whole kernel.
  constexpr int kMT = Tr::kMTiles;
  constexpr int kQSteps = Tr::kQInRegs ? Tr::kKSteps : 1;
  uint32_t q_frag[kMT][kQSteps][4];
  if constexpr (Tr::kQInRegs) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int ks = 0; ks < Tr::kKSteps; ++ks)
        load_a<kStride>(q_frag[mt][ks], q_s, warp * Tr::kRowsPerWarp + mt * 16, ks * 16, lane);
  }

  float o_acc[kMT][Tr::kOutTiles][4];
  float row_max[kMT][2];  // log2-scaled running max, rows g and g + 8 of each m-tile
  float row_sum[kMT][2];  // this lane's share of the running sums
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int n = 0; n < Tr::kOutTiles; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) o_acc[mt][n][c] = 0.0f;
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }
  const float score_scale = p.scale * kLog2e;
  // Row of the query tile held in accumulator rows g (+ 8) of m-tile mt.
  const int warp_row0 = warp * Tr::kRowsPerWarp + g;

  for (int kb = 0; kb < n_kblocks; ++kb) {
    const int k0 = kb * kBc;
    // K_kb has landed (V_kb may still be in flight).
    cp_async_wait<1>();
    __syncthreads();

    // pass 1: S = Q K^T. One ldmatrix.x4 of K gives the B fragments of two n8
    // tiles for one k16 step: matrices (keys 0-7, dims 0-7), (keys 0-7, dims
    // 8-15), (keys 8-15, dims 0-7), (keys 8-15, dims 8-15); they serve every
    // m-tile of the warp.
    float s[kMT][Tr::kScoreTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < Tr::kScoreTiles; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[mt][n][c] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ++ks) {
      const int qs = Tr::kQInRegs ? ks : 0;
      if constexpr (!Tr::kQInRegs) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
          load_a<kStride>(q_frag[mt][0], q_s, warp * Tr::kRowsPerWarp + mt * 16, ks * 16, lane);
      }
#pragma unroll
      for (int np = 0; np < Tr::kScoreTiles / 2; ++np) {
        uint32_t k_frag[4];
        load_b_nk<kStride>(k_frag, k_s, np * 16, ks * 16, lane);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_16816(s[mt][2 * np], q_frag[mt][qs], k_frag[0], k_frag[1]);
          mma_16816(s[mt][2 * np + 1], q_frag[mt][qs], k_frag[2], k_frag[3]);
        }
      }
    }

    // pass 2: mask + online softmax. s[mt][n][2r + c]: row g + 8r of m-tile
    // mt, key k0 + 8n + 2t + c.
    const bool need_mask = k0 + kBc > key_len || (causal && k0 + kBc - 1 > q0);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = q0 + warp_row0 + mt * 16 + 8 * r;
        float tile_max = -INFINITY;
#pragma unroll
        for (int n = 0; n < Tr::kScoreTiles; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            float x = s[mt][n][2 * r + c] * score_scale;
            if (need_mask) {
              const int j = k0 + 8 * n + 2 * t + c;
              if (j >= key_len || (causal && j > i)) x = -INFINITY;
            }
            s[mt][n][2 * r + c] = x;
            tile_max = fmaxf(tile_max, x);
          }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float new_max = fmaxf(row_max[mt][r], tile_max);
        // Nothing visible yet: subtract 0, not -inf, so exp2 gives 0, not NaN.
        const float ref = new_max == -INFINITY ? 0.0f : new_max;
        const float correction = fast_exp2(row_max[mt][r] - ref);
        row_max[mt][r] = new_max;
        float tile_sum = 0.0f;
#pragma unroll
        for (int n = 0; n < Tr::kScoreTiles; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float prob = fast_exp2(s[mt][n][2 * r + c] - ref);
            s[mt][n][2 * r + c] = prob;
            tile_sum += prob;
          }
        row_sum[mt][r] = row_sum[mt][r] * correction + tile_sum;
#pragma unroll
        for (int n = 0; n < Tr::kOutTiles; ++n) {
          o_acc[mt][n][2 * r] *= correction;
          o_acc[mt][n][2 * r + 1] *= correction;
        }
      }

    // V_kb has landed and every warp is done with k_s: load K_{kb+1} while
    // P V runs.
    cp_async_wait<0>();
    __syncthreads();
    if (kb + 1 < n_kblocks)
      load_tile_bf16<kBc, Tr>(k_s, k_head, p.k_stride_t, k0 + kBc, key_len, head_dim, tid);
    cp_async_commit();

    // pass 3: O += P V. n8 tiles 2kk and 2kk + 1 of P are the A fragment of
    // k16 step kk. ldmatrix.trans of V: matrices (keys 0-7, dims 0-7),
    // (keys 8-15, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 8-15)
    // give the B fragments of two n8 tiles of O, for every m-tile.
#pragma unroll
    for (int kk = 0; kk < Tr::kPvSteps; ++kk) {
      uint32_t p_frag[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) acc_to_a(p_frag[mt], s[mt], kk);
#pragma unroll
      for (int dp = 0; dp < Tr::kOutTiles / 2; ++dp) {
        uint32_t v_frag[4];
        load_b_kn<kStride>(v_frag, v_s, kk * 16, dp * 16, lane);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_16816(o_acc[mt][2 * dp], p_frag[mt], v_frag[0], v_frag[1]);
          mma_16816(o_acc[mt][2 * dp + 1], p_frag[mt], v_frag[2], v_frag[3]);
        }
      }
    }

    // Every warp is done with v_s: load V_{kb+1} while the next Q K^T runs.
    __syncthreads();
    if (kb + 1 < n_kblocks)
      load_tile_bf16<kBc, Tr>(v_s, v_head, p.v_stride_t, k0 + kBc, key_len, head_dim, tid);
    cp_async_commit();
  }
  cp_async_wait<0>();  // nothing may be left in flight when the block exits

  // Epilogue: o_acc[mt][n][2r + c] is row g + 8r of m-tile mt, column
  // 8n + 2t + c.
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = row_sum[mt][r];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      const int i = q0 + warp_row0 + mt * 16 + 8 * r;
      if (i >= tq) continue;
      const float inv = total > 0.0f ? 1.0f / total : 0.0f;  // empty row -> o = 0
      bf16* o_row =
          p.o + b * p.o_stride_b + h * p.o_stride_h + static_cast<int64_t>(i) * p.o_stride_t;
#pragma unroll
      for (int n = 0; n < Tr::kOutTiles; ++n) {
        const int d = 8 * n + 2 * t;
        if (d < head_dim)  // head_dim is even: columns d and d + 1 are both in or both out
          *reinterpret_cast<uint32_t*>(o_row + d) =
              pack_bf16(o_acc[mt][n][2 * r] * inv, o_acc[mt][n][2 * r + 1] * inv);
      }
      if (p.lse != nullptr && t == 0)
        p.lse[bh * tq + i] = total > 0.0f ? (row_max[mt][r] + log2f(total)) * kLn2 : -INFINITY;
    }
#endif
}

// The forward's tilings per padded head dim (flash::FwdTiling: warps,
// m-tiles per warp, keys a step, Q in registers, heads fastest when causal).
// Entry kDefaultTiling is the one flash_attention_forward_bf16 runs; entry 0
// is the one it ran before, kept to be measured against it
// (flash_standalone_test --bench-tilings). Placing causal blocks with the
// heads fastest is what made the default faster; the timings, and the
// tilings tried and not kept: docs/bench/gpu_h100.md ("Third loan").
template <int kD>
struct FwdTilings;
template <>
struct FwdTilings<64> {
  using List = std::tuple<flash::FwdTiling<4, 2, 64>, flash::FwdTiling<4, 2, 64, -1, true>>;
};
template <>
struct FwdTilings<128> {
  using List = std::tuple<flash::FwdTiling<4, 2, 32>, flash::FwdTiling<4, 2, 32, -1, true>>;
};
constexpr int kTilingCount = std::tuple_size_v<FwdTilings<64>::List>;
constexpr int kDefaultTiling = 1;
static_assert(std::tuple_size_v<FwdTilings<128>::List> == kTilingCount, "one index names a tiling at every head dim");

template <int kD, class Tiling>
cudaError_t launch(const AttentionForwardParams<bf16, float>& p, cudaStream_t stream) {
  using Tr = Traits<kD, Tiling>;
  // The host pass reads the launch shape; every arch's traits must agree on it.
  using Sm80 = flash::FlashFwdMmaTraits<kD, 800, Tiling>;
  using Sm90 = flash::FlashFwdMmaTraits<kD, 900, Tiling>;
  static_assert(Sm80::kBr == Sm90::kBr && Sm80::kThreads == Sm90::kThreads &&
                Sm80::kSmemBytes == Sm90::kSmemBytes);
  const int64_t n_qblocks = (p.q_len + Tr::kBr - 1) / Tr::kBr;
  if constexpr (Tr::kNeedsSmemOptIn) {
    const cudaError_t err = cudaFuncSetAttribute(
        flash_forward_bf16_kernel<kD, Tiling>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
    if (err != cudaSuccess) return err;
  }
  flash_forward_bf16_kernel<kD, Tiling>
      <<<static_cast<unsigned>(p.batch * p.heads * n_qblocks), Tr::kThreads, Tr::kSmemBytes,
         stream>>>(p, static_cast<int>(n_qblocks));
  return cudaGetLastError();
}

template <class Tiling>
std::string tiling_name() {
  const char* q = Tiling::kQInRegsOrAuto < 0 ? "" : (Tiling::kQInRegsOrAuto ? ", Q in registers" : ", Q in shared memory");
  return std::to_string(Tiling::kWarps) + " warps x " + std::to_string(Tiling::kMTiles) + " m-tiles, " +
         std::to_string(Tiling::kBcOr0) + " keys a step" + q +
         (Tiling::kHeadsFastest ? ", heads fastest when causal" : "");
}

}  // namespace

bool flash_attention_forward_bf16_supported(const AttentionForwardParams<bf16, float>& p) {
  constexpr int64_t kMaxLen = int64_t{1} << 30;
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
  // The most blocks any tiling launches: 64 queries a block at least.
  constexpr int64_t kMinBr = 64;
  const int64_t n_qblocks = (p.q_len + kMinBr - 1) / kMinBr;
  return bf16_mma_device() && p.head_dim >= 8 && p.head_dim <= kMaxHeadDim && p.head_dim % 8 == 0 &&
         rows_16b(p.q, p.q_stride_b, p.q_stride_h, p.q_stride_t) &&
         rows_16b(p.k, p.k_stride_b, p.k_stride_h, p.k_stride_t) &&
         rows_16b(p.v, p.v_stride_b, p.v_stride_h, p.v_stride_t) && p.q_len < kMaxLen && p.k_len < kMaxLen && p.batch * p.heads * n_qblocks <= kMaxGridX;
}

int flash_attention_forward_bf16_tilings() { return kTilingCount; }

std::string flash_attention_forward_bf16_tiling_name(int head_dim, int tiling) {
  return flash::tiling_label<FwdTilings>(head_dim, tiling, kDefaultTiling,
                                     [](auto tag) { return tiling_name<typename decltype(tag)::type>(); });
}

int flash_attention_forward_bf16(const AttentionForwardParams<bf16, float>& p, cudaStream_t stream) {
  return flash_attention_forward_bf16_tiling(p, stream, kDefaultTiling);
}

int flash_attention_forward_bf16_tiling(const AttentionForwardParams<bf16, float>& p, cudaStream_t stream,
                                        int tiling) {
  if (tiling < 0 || tiling >= kTilingCount) return static_cast<int>(cudaErrorInvalidValue);
  if (p.batch * p.heads == 0 || p.q_len == 0) return 0;
  // o is stored as bf16 pairs: 4-byte aligned rows and pairs.
  const bool o_ok = p.o != nullptr && (reinterpret_cast<uintptr_t>(p.o) & 3u) == 0 &&
                    p.o_stride_t % 2 == 0 && p.o_stride_h % 2 == 0 && p.o_stride_b % 2 == 0;
  if (!o_ok || !flash_attention_forward_bf16_supported(p))
    return static_cast<int>(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  flash::with_tiling<FwdTilings>(static_cast<int>(p.head_dim), tiling, [&](auto d, auto tag) {
    err = launch<decltype(d)::value, typename decltype(tag)::type>(p, stream);
  });
  return static_cast<int>(err);
}

}  // namespace nmt::ops::cuda
