// CPU emulation of the CUDA flash kernels' tile primitives (no GPU, no CUDA
// runtime call): compiled by nvcc, run on the host.
//
// The primitives in src/ops/attention/cuda/flash_tile.cuh are __host__
// __device__ and take the thread index as an argument, so this test runs the
// very code the kernels run: for one thread block it calls load_tile for every
// thread (the cooperative global -> shared copy), then each tile multiply for
// every thread one after another, scatters the register patches through the
// traits' ownership map and checks
//   - every element of the tile is owned by exactly one thread;
//   - each result equals a plain sequential fmaf loop bit for bit (same terms,
//     same order), and is within the float32 rounding bound of a float64
//     matrix multiply;
//   - rows past T (edge tiles) and head-dim columns past D come out exactly 0:
//     the source buffers carry NaN past the last row and in the row padding,
//     so reading one element too far shows up as NaN.
// It also pins the traits' derived numbers (shared memory, blocks per SM) to
// the formulas the kernels were tuned with.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "ops/attention/cuda/flash_kernel_traits.h"
#include "ops/attention/cuda/flash_tile.cuh"

namespace {

using namespace nmt::ops::cuda::flash;

int g_failures = 0;
int g_checks = 0;

#define CHECK(cond, ...)                                       \
  do {                                                         \
    ++g_checks;                                                \
    if (!(cond)) {                                             \
      if (++g_failures <= 20) {                                \
        std::printf("FAIL %s:%d: ", __FILE__, __LINE__);       \
        std::printf(__VA_ARGS__);                              \
        std::printf("\n");                                     \
      }                                                        \
    }                                                          \
  } while (0)

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A 16-byte aligned float buffer (cp.async / float4 loads need it).
struct Buffer {
  std::vector<float4> storage;
  float* data;
  explicit Buffer(size_t n, float fill) : storage((n + 3) / 4 + 1) {
    data = reinterpret_cast<float*>(storage.data());
    for (size_t i = 0; i < n; ++i) data[i] = fill;
  }
};

// Deterministic values in [-1, 1).
float value(uint32_t seed, uint32_t i) {
  uint32_t x = seed * 0x9E3779B9u ^ (i + 0x7F4A7C15u) * 0x85EBCA6Bu;
  x ^= x >> 15, x *= 0x2C1B3C6Du, x ^= x >> 12, x *= 0x297A2D39u, x ^= x >> 15;
  return static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f;
}

// One head's [T, head_dim] matrix with row stride `stride` >= head_dim,
// followed by kExtraRows rows; padding columns and extra rows are NaN.
struct Matrix {
  static constexpr int kExtraRows = 2;
  int rows, cols, stride;
  Buffer buf;
  Matrix(int rows_, int cols_, int stride_, uint32_t seed)
      : rows(rows_), cols(cols_), stride(stride_),
        buf(static_cast<size_t>(rows_ + kExtraRows) * stride_, kNaN) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) at(r, c) = value(seed, static_cast<uint32_t>(r * cols + c));
  }
  float& at(int r, int c) { return buf.data[static_cast<size_t>(r) * stride + c]; }
  float get(int r, int c) const { return buf.data[static_cast<size_t>(r) * stride + c]; }
};

// Row `r` of a tile copied from m starting at row0: what the kernel should
// see in shared memory (zeros past the matrix).
float tile_value(const Matrix& m, int row0, int r, int c) {
  return row0 + r < m.rows && c < m.cols ? m.get(row0 + r, c) : 0.0f;
}

// |float result - float64 reference| bound for a K-term sequential fmaf sum.
double bound(int k_terms, double sum_abs) {
  return 2.0 * k_terms * std::ldexp(1.0, -24) * sum_abs + 1e-30;
}

template <class Tr, int kRows>
void emulate_load(float* tile, const Matrix& m, int row0, bool vec_ok) {
  for (int tid = 0; tid < Tr::kThreads; ++tid)
    load_tile<kRows, Tr>(tile, m.buf.data, m.stride, row0, m.rows, m.cols, vec_ok, tid);
}

// Checks one shared tile [kRows][kStride] against the matrix it was copied
// from: the real data, and exact zeros in edge rows and padded columns.
template <class Tr, int kRows>
void check_tile(const float* tile, const Matrix& m, int row0, const char* what) {
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < Tr::kHeadDim; ++c) {
      const float got = tile[r * Tr::kStride + c];
      const float want = tile_value(m, row0, r, c);
      CHECK(got == want, "%s D=%d load_tile row0 %d: tile[%d][%d] = %g, want %g", what,
            Tr::kHeadDim, row0, r, c, got, want);
    }
}

// S = A B^T (mma_abt) for every thread; A rows from a (row0_a), B rows from b (row0_b).
template <class Tr, int kUnroll>
void check_abt(const float* a_s, const float* b_s, const Matrix& a, int row0_a, const Matrix& b,
               int row0_b, const char* what) {
  constexpr int kBr = Tr::kBr, kBc = Tr::kBc;
  std::vector<float> s_tile(kBr * kBc, kNaN);
  std::vector<int> owners(kBr * kBc, 0);
  for (int tid = 0; tid < Tr::kThreads; ++tid) {
    const int rg = tid / Tr::kColGroups, cg = tid % Tr::kColGroups;
    float s[Tr::kTm][Tr::kTn];
    zero(s);
    mma_abt<Tr, kUnroll>(s, a_s, b_s, rg, cg);
    for (int t = 0; t < Tr::kTm; ++t)
      for (int u = 0; u < Tr::kTn; ++u) {
        const int i = Tr::row_of(rg, t), j = Tr::key_of(cg, u);
        s_tile[i * kBc + j] = s[t][u];
        ++owners[i * kBc + j];
      }
  }
  for (int i = 0; i < kBr; ++i)
    for (int j = 0; j < kBc; ++j) {
      CHECK(owners[i * kBc + j] == 1, "%s D=%d: S[%d][%d] owned by %d threads", what,
            Tr::kHeadDim, i, j, owners[i * kBc + j]);
      float seq = 0.0f;
      double ref = 0.0, sum_abs = 0.0;
      for (int d = 0; d < Tr::kHeadDim; ++d) {
        const float x = tile_value(a, row0_a, i, d), y = tile_value(b, row0_b, j, d);
        seq = std::fmaf(x, y, seq);
        ref += static_cast<double>(x) * y;
        sum_abs += std::fabs(static_cast<double>(x) * y);
      }
      const float got = s_tile[i * kBc + j];
      CHECK(got == seq, "%s D=%d rows %d/%d: S[%d][%d] = %.9g, sequential fmaf %.9g", what,
            Tr::kHeadDim, row0_a, row0_b, i, j, got, seq);
      CHECK(std::fabs(got - ref) <= bound(Tr::kHeadDim, sum_abs),
            "%s D=%d: S[%d][%d] = %.9g, float64 %.12g", what, Tr::kHeadDim, i, j, got, ref);
      if (row0_a + i >= a.rows || row0_b + j >= b.rows)
        CHECK(got == 0.0f, "%s D=%d: edge S[%d][%d] = %g, want 0", what, Tr::kHeadDim, i, j, got);
    }
}

// Fills a [kBr][kPStride] probability-like tile (P or dS) with values; keys
// past the edge get 0, as the kernels' masking leaves them.
template <class Tr>
std::vector<float> fill_prob(float* p_s, uint32_t seed, int valid_keys) {
  std::vector<float> p(Tr::kBr * Tr::kBc);
  for (int i = 0; i < Tr::kBr; ++i)
    for (int j = 0; j < Tr::kBc; ++j) {
      const float x = j < valid_keys ? value(seed, static_cast<uint32_t>(i * Tr::kBc + j)) : 0.0f;
      p[i * Tr::kBc + j] = x;
      p_s[i * Tr::kPStride + j] = x;
    }
  return p;
}

// C = A B (mma_ab): a_s is a [kBr][kPStride] tile holding `p`, b_s the
// [kBc][kStride] tile copied from b at row0_b.
template <class Tr, int kUnroll>
void check_ab(const float* a_s, const std::vector<float>& p, const float* b_s, const Matrix& b,
              int row0_b, const char* what) {
  constexpr int kBr = Tr::kBr, kBc = Tr::kBc, kD = Tr::kHeadDim;
  std::vector<float> c_tile(kBr * kD, kNaN);
  std::vector<int> owners(kBr * kD, 0);
  for (int tid = 0; tid < Tr::kThreads; ++tid) {
    const int rg = tid / Tr::kColGroups, cg = tid % Tr::kColGroups;
    float c[Tr::kTm][Tr::kTd][4];
    zero(c);
    mma_ab<Tr, kUnroll>(c, a_s, b_s, rg, cg);
    for (int t = 0; t < Tr::kTm; ++t)
      for (int e = 0; e < Tr::kTd; ++e)
        for (int x = 0; x < 4; ++x) {
          const int i = Tr::row_of(rg, t), d = Tr::dcol_of(cg, e) + x;
          c_tile[i * kD + d] = c[t][e][x];
          ++owners[i * kD + d];
        }
  }
  for (int i = 0; i < kBr; ++i)
    for (int d = 0; d < kD; ++d) {
      CHECK(owners[i * kD + d] == 1, "%s D=%d: C[%d][%d] owned by %d threads", what, kD, i, d,
            owners[i * kD + d]);
      float seq = 0.0f;
      double ref = 0.0, sum_abs = 0.0;
      for (int j = 0; j < kBc; ++j) {
        const float x = p[i * kBc + j], y = tile_value(b, row0_b, j, d);
        seq = std::fmaf(x, y, seq);
        ref += static_cast<double>(x) * y;
        sum_abs += std::fabs(static_cast<double>(x) * y);
      }
      const float got = c_tile[i * kD + d];
      CHECK(got == seq, "%s D=%d row0 %d: C[%d][%d] = %.9g, sequential fmaf %.9g", what, kD,
            row0_b, i, d, got, seq);
      CHECK(std::fabs(got - ref) <= bound(kBc, sum_abs),
            "%s D=%d: C[%d][%d] = %.9g, float64 %.12g", what, kD, i, d, got, ref);
      if (d >= b.cols) CHECK(got == 0.0f, "%s D=%d: padded C[%d][%d] = %g", what, kD, i, d, got);
    }
}

// C1 = A1^T B1 and C2 = A2^T B2 (mma_atb_x2), as dV = P^T dO and dK = dS^T Q.
template <class Tr, int kUnroll>
void check_atb_x2(const float* a1_s, const std::vector<float>& a1, const float* b1_s,
                  const Matrix& b1, const float* a2_s, const std::vector<float>& a2,
                  const float* b2_s, const Matrix& b2, int row0_b) {
  constexpr int kBr = Tr::kBr, kBc = Tr::kBc, kD = Tr::kHeadDim;
  std::vector<float> c1_tile(kBc * kD, kNaN), c2_tile(kBc * kD, kNaN);
  std::vector<int> owners(kBc * kD, 0);
  for (int tid = 0; tid < Tr::kThreads; ++tid) {
    const int rg = tid / Tr::kColGroups, cg = tid % Tr::kColGroups;
    float c1[Tr::kJn][Tr::kTd][4], c2[Tr::kJn][Tr::kTd][4];
    zero(c1);
    zero(c2);
    mma_atb_x2<Tr, kUnroll>(c1, a1_s, b1_s, c2, a2_s, b2_s, rg, cg);
    for (int r = 0; r < Tr::kJn; ++r)
      for (int e = 0; e < Tr::kTd; ++e)
        for (int x = 0; x < 4; ++x) {
          const int j = Tr::key_row_of(rg, r), d = Tr::dcol_of(cg, e) + x;
          c1_tile[j * kD + d] = c1[r][e][x];
          c2_tile[j * kD + d] = c2[r][e][x];
          ++owners[j * kD + d];
        }
  }
  for (int j = 0; j < kBc; ++j)
    for (int d = 0; d < kD; ++d) {
      CHECK(owners[j * kD + d] == 1, "atb D=%d: C[%d][%d] owned by %d threads", kD, j, d,
            owners[j * kD + d]);
      for (int which = 0; which < 2; ++which) {
        const std::vector<float>& a = which == 0 ? a1 : a2;
        const Matrix& b = which == 0 ? b1 : b2;
        float seq = 0.0f;
        double ref = 0.0, sum_abs = 0.0;
        for (int i = 0; i < kBr; ++i) {
          const float x = a[i * kBc + j], y = tile_value(b, row0_b, i, d);
          seq = std::fmaf(x, y, seq);
          ref += static_cast<double>(x) * y;
          sum_abs += std::fabs(static_cast<double>(x) * y);
        }
        const float got = (which == 0 ? c1_tile : c2_tile)[j * kD + d];
        CHECK(got == seq, "atb%d D=%d row0 %d: C[%d][%d] = %.9g, sequential fmaf %.9g", which + 1,
              kD, row0_b, j, d, got, seq);
        CHECK(std::fabs(got - ref) <= bound(kBr, sum_abs),
              "atb%d D=%d: C[%d][%d] = %.9g, float64 %.12g", which + 1, kD, j, d, got, ref);
      }
    }
}

// The forward's tiles for one (Tq, Tk, head_dim): every query block against
// the first and the last (edge) key block.
template <class Tr>
void forward_case(int tq, int tk, int head_dim, int stride, bool vec_ok) {
  const Matrix q(tq, head_dim, stride, 1), k(tk, head_dim, stride, 2), v(tk, head_dim, stride, 3);
  Buffer smem(Tr::kSmemElems, kNaN);
  float* q_s = smem.data + Tr::kSmemQ;
  float* k_s = smem.data + Tr::kSmemK;
  float* v_s = smem.data + Tr::kSmemV;
  float* p_s = smem.data + Tr::kSmemP;
  const int n_qblocks = (tq + Tr::kBr - 1) / Tr::kBr;
  const int n_kblocks = (tk + Tr::kBc - 1) / Tr::kBc;
  for (int qb = 0; qb < n_qblocks; ++qb) {
    const int q0 = qb * Tr::kBr;
    emulate_load<Tr, Tr::kBr>(q_s, q, q0, vec_ok);
    check_tile<Tr, Tr::kBr>(q_s, q, q0, "fwd Q");
    for (int kb : {0, n_kblocks - 1}) {
      const int k0 = kb * Tr::kBc;
      emulate_load<Tr, Tr::kBc>(k_s, k, k0, vec_ok);
      emulate_load<Tr, Tr::kBc>(v_s, v, k0, vec_ok);
      check_tile<Tr, Tr::kBc>(k_s, k, k0, "fwd K");
      check_abt<Tr, Tr::kUnrollQK>(q_s, k_s, q, q0, k, k0, "fwd S=QK^T");
      const std::vector<float> p = fill_prob<Tr>(p_s, 10 + kb, tk - k0);
      check_ab<Tr, Tr::kUnrollPV>(p_s, p, v_s, v, k0, "fwd O+=PV");
    }
  }
}

// The backward's tiles: the key block at k0 against every query block.
template <class Tr>
void backward_case(int tq, int tk, int head_dim, int stride, bool vec_ok) {
  const Matrix q(tq, head_dim, stride, 4), k(tk, head_dim, stride, 5), v(tk, head_dim, stride, 6);
  const Matrix d_o(tq, head_dim, stride, 7);
  Buffer smem(Tr::kSmemElems, kNaN);
  float* q_s = smem.data + Tr::kSmemQ;
  float* do_s = smem.data + Tr::kSmemDO;
  float* k_s = smem.data + Tr::kSmemK;
  float* v_s = smem.data + Tr::kSmemV;
  float* p_s = smem.data + Tr::kSmemP;
  float* ds_s = smem.data + Tr::kSmemDS;
  const int n_qblocks = (tq + Tr::kBr - 1) / Tr::kBr;
  const int n_kblocks = (tk + Tr::kBc - 1) / Tr::kBc;
  for (int kb : {0, n_kblocks - 1}) {
    const int k0 = kb * Tr::kBc;
    emulate_load<Tr, Tr::kBc>(k_s, k, k0, vec_ok);
    emulate_load<Tr, Tr::kBc>(v_s, v, k0, vec_ok);
    check_tile<Tr, Tr::kBc>(v_s, v, k0, "bwd V");
    for (int qb = 0; qb < n_qblocks; ++qb) {
      const int q0 = qb * Tr::kBr;
      emulate_load<Tr, Tr::kBr>(q_s, q, q0, vec_ok);
      emulate_load<Tr, Tr::kBr>(do_s, d_o, q0, vec_ok);
      check_tile<Tr, Tr::kBr>(do_s, d_o, q0, "bwd dO");
      check_abt<Tr, Tr::kUnrollQK>(q_s, k_s, q, q0, k, k0, "bwd S=QK^T");
      check_abt<Tr, Tr::kUnrollQK>(do_s, v_s, d_o, q0, v, k0, "bwd dP=dOV^T");
      // Query rows past Tq have P = dS = 0 in the kernel (lse2 = +inf).
      std::vector<float> p = fill_prob<Tr>(p_s, 20 + qb, tk - k0);
      std::vector<float> ds = fill_prob<Tr>(ds_s, 30 + qb, tk - k0);
      for (int i = tq - q0; i < Tr::kBr; ++i)
        for (int j = 0; j < Tr::kBc; ++j) {
          p[i * Tr::kBc + j] = ds[i * Tr::kBc + j] = 0.0f;
          p_s[i * Tr::kPStride + j] = ds_s[i * Tr::kPStride + j] = 0.0f;
        }
      check_atb_x2<Tr, Tr::kUnrollDKDV>(p_s, p, do_s, d_o, ds_s, ds, q_s, q, q0);
      check_ab<Tr, Tr::kUnrollDQ>(ds_s, ds, k_s, k, k0, "bwd dQ+=dSK");
    }
  }
}

// Shapes whose last query and key blocks are partial, for the full head dim
// (16-byte path), a smaller multiple of 4 (16-byte path, padded columns) and
// an odd one (element-wise path).
template <class Tr>
void shapes(void (*run)(int, int, int, int, bool)) {
  constexpr int kD = Tr::kHeadDim;
  const int tq = Tr::kBr + Tr::kBr / 2 + 3;
  const int tk = 2 * Tr::kBc + 5;
  run(tq, tk, kD, kD + 4, true);
  run(tq, tk, kD - 12, kD - 8, true);
  run(tq, tk, kD - 13, kD - 10, false);
}

template <int kD, int kArch>
void run_head_dim() {
  using Fwd = FlashFwdTraits<kD, float, kArch>;
  using Bwd = FlashBwdTraits<kD, float, kArch>;
  shapes<Fwd>(&forward_case<Fwd>);
  shapes<Bwd>(&backward_case<Bwd>);
  std::printf(
      "D = %3d, sm_%d: forward %3dx%-3d %3d threads %6d B smem %d blocks/SM; "
      "backward %3dx%-3d %3d threads %6d B smem %d blocks/SM\n",
      kD, kArch / 10, Fwd::kBr, Fwd::kBc, Fwd::kThreads, Fwd::kSmemBytes, Fwd::kMinBlocksPerSm,
      Bwd::kBr, Bwd::kBc, Bwd::kThreads, Bwd::kSmemBytes, Bwd::kMinBlocksPerSm);
}

// The derived numbers against the formulas the kernels were tuned with:
// forward (kBr + 2 kBc)(kD + 4) + kBr (kBc + 8) floats, backward
// (2 kBr + 2 kBc)(kD + 4) + 2 kBr (kBc + 8); blocks per SM = the wish capped
// by SM capacity / (bytes + 1 KB).
template <int kD, int kArch>
constexpr bool traits_match_tuning() {
  using F = FlashFwdTraits<kD, float, kArch>;
  using B = FlashBwdTraits<kD, float, kArch>;
  constexpr int fwd_floats = (F::kBr + 2 * F::kBc) * (kD + 4) + F::kBr * (F::kBc + 8);
  constexpr int bwd_floats = (2 * B::kBr + 2 * B::kBc) * (kD + 4) + 2 * B::kBr * (B::kBc + 8);
  constexpr int sm = kArch >= 900 ? 228 * 1024 : 164 * 1024;
  constexpr int fwd_fit = sm / (fwd_floats * 4 + 1024);
  constexpr int bwd_fit = sm / (bwd_floats * 4 + 1024);
  constexpr int fwd_wish = FwdTileChoice<kD>::kMinBlocks;
  constexpr int bwd_wish = BwdTileChoice<kD>::kMinBlocks;
  return F::kSmemBytes == fwd_floats * 4 && B::kSmemBytes == bwd_floats * 4 &&
         F::kMinBlocksPerSm == (fwd_fit < 1 ? 1 : fwd_fit < fwd_wish ? fwd_fit : fwd_wish) &&
         B::kMinBlocksPerSm == (bwd_fit < 1 ? 1 : bwd_fit < bwd_wish ? bwd_fit : bwd_wish) &&
         F::kSmemBytes > kSmemDefaultPerBlock && B::kSmemBytes > kSmemDefaultPerBlock;
}
static_assert(traits_match_tuning<32, 800>() && traits_match_tuning<64, 800>() &&
              traits_match_tuning<128, 800>() && traits_match_tuning<192, 800>() &&
              traits_match_tuning<256, 800>());
static_assert(traits_match_tuning<32, 900>() && traits_match_tuning<64, 900>() &&
              traits_match_tuning<128, 900>() && traits_match_tuning<192, 900>() &&
              traits_match_tuning<256, 900>());
// D = 64 forward: 104 KB, one block per A100 SM, two per H100 SM.
static_assert(FlashFwdTraits<64, float, 800>::kSmemBytes == 106496);
static_assert(FlashFwdTraits<64, float, 800>::kMinBlocksPerSm == 1);
static_assert(FlashFwdTraits<64, float, 900>::kMinBlocksPerSm == 2);

}  // namespace

int main() {
  run_head_dim<32, 800>();
  run_head_dim<64, 800>();
  run_head_dim<128, 800>();
  run_head_dim<192, 800>();
  run_head_dim<256, 800>();
  // Same tile shapes under the sm_90 traits (only blocks per SM differ).
  run_head_dim<64, 900>();
  run_head_dim<256, 900>();
  std::printf("%d checks, %d failed\n", g_checks, g_failures);
  if (g_failures != 0) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("flash tile emulation: all checks passed\n");
  return 0;
}
