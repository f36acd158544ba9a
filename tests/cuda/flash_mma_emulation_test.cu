// CPU emulation of the tensor-core primitives of the bf16 flash kernels
// (no GPU, no CUDA runtime call): compiled by nvcc, run on the host.
//
// ldmatrix (plain and .trans) and mma.sync m16n8k16 are emulated here from
// the PTX ISA's own description (which lane gives which row address, which
// lane receives which elements, the A / B / C fragment tables), written out
// independently of src/ops/attention/cuda/flash_mma.cuh. The test then
// composes them with that header's lane maps (a_offset, b_nk_offset,
// b_kn_offset, acc_row, acc_col, acc_to_a_with) in the order the kernels use
// them, for one warp at each of its positions in the block:
//   - a score product, S = A B^T from a row-major [m][k] tile and an [n][k]
//     tile (forward Q K^T; backward K Q^T, V dO^T, Q K^T, dO V^T);
//   - its accumulators turned into the A operand of a second product with a
//     [k][n] tile read by ldmatrix.trans (forward P V; backward P^T dO,
//     dS^T Q, dS K),
// and compares both with plain loops. Inputs are multiples of 1/4 in
// [-1, 1], so every product and sum is exact in float32 and every score is
// exact in bf16: a wrong lane map shows up as a wrong value, never as
// rounding. It also pins the traits' tile shapes and shared-memory sizes.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "ops/attention/cuda/flash_kernel_traits.h"
#include "ops/attention/cuda/flash_mma.cuh"
#include "ops/bf16.h"

namespace {

using namespace nmt::ops::cuda::flash;
using nmt::ops::to_bf16;
using nmt::ops::to_float;

int g_failures = 0;
int g_checks = 0;

#define CHECK(cond, ...)                                 \
  do {                                                   \
    ++g_checks;                                          \
    if (!(cond)) {                                       \
      if (++g_failures <= 20) {                          \
        std::printf("FAIL %s:%d: ", __FILE__, __LINE__); \
        std::printf(__VA_ARGS__);                        \
        std::printf("\n");                               \
      }                                                  \
    }                                                    \
  } while (0)

constexpr int kLanes = 32;

// One 32-bit register holding a bf16 pair: lo is the lower column / row.
struct Reg {
  float lo, hi;
};

float round_bf16(float x) { return to_float(to_bf16(x)); }

// acc_to_a_with's pack on the host: a bf16 pair as two rounded floats.
// (__host__ __device__ only because acc_to_a_with is; never run on a GPU.)
struct PackBf16 {
  NMT_FLASH_HD Reg operator()(float lo, float hi) const {
#if defined(__CUDA_ARCH__)
    return Reg{lo, hi};
#else
    return Reg{round_bf16(lo), round_bf16(hi)};
#endif
  }
};

// Deterministic multiples of 1/4 in [-1, 1].
float quarter(uint32_t seed, uint32_t i) {
  uint32_t x = seed * 0x9E3779B9u ^ (i + 0x7F4A7C15u) * 0x85EBCA6Bu;
  x ^= x >> 15, x *= 0x2C1B3C6Du, x ^= x >> 13;
  return static_cast<float>(static_cast<int>(x % 9) - 4) / 4.0f;
}

// A shared-memory tile of `rows` rows, row stride `stride` (elements).
struct Tile {
  int rows, stride;
  std::vector<float> v;
  Tile(int rows_, int stride_, uint32_t seed) : rows(rows_), stride(stride_), v(rows_ * stride_) {
    for (int i = 0; i < rows * stride; ++i) v[i] = quarter(seed, i);
  }
  float at(int r, int c) const { return v[r * stride + c]; }
};

// ldmatrix.sync.aligned.m8n8.x4(.trans).b16: lanes 8m .. 8m + 7 give the
// addresses of rows 0..7 of matrix m (eight consecutive elements each).
// Without .trans lane l receives row l / 4, elements 2 (l % 4) and
// 2 (l % 4) + 1 of each matrix; with .trans, column l / 4, rows 2 (l % 4)
// and 2 (l % 4) + 1.
void emu_ldmatrix(const Tile& tile, const int (&offset)[kLanes], bool trans, Reg (&out)[kLanes][4]) {
  for (int m = 0; m < 4; ++m) {
    float mat[8][8];
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) {
        const int at = offset[8 * m + r] + c;
        CHECK(at >= 0 && at < static_cast<int>(tile.v.size()), "ldmatrix address %d out of the tile", at);
        mat[r][c] = at >= 0 && at < static_cast<int>(tile.v.size()) ? tile.v[at] : 0.0f;
      }
    for (int l = 0; l < kLanes; ++l) {
      const int a = l / 4, b = 2 * (l % 4);
      out[l][m] = trans ? Reg{mat[b][a], mat[b + 1][a]} : Reg{mat[a][b], mat[a][b + 1]};
    }
  }
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, d += a b, with
// groupID = l / 4 and threadID_in_group = l % 4 (PTX ISA fragment tables):
//   A: a0, a1 at (groupID, 2 tig + i); a2, a3 at (groupID + 8, 2 tig + i);
//      a4, a5 at (groupID, 2 tig + 8 + i); a6, a7 at (groupID + 8, 2 tig + 8 + i)
//   B: b0, b1 at (k 2 tig + i, n groupID); b2, b3 at (k 2 tig + 8 + i, n groupID)
//   C: c0, c1 at (groupID, 2 tig + i); c2, c3 at (groupID + 8, 2 tig + i)
// Registers hold pairs in order: a[0] = {a0, a1}, a[1] = {a2, a3}, ...
void emu_mma(float (&d)[kLanes][4], const Reg (&a)[kLanes][4], const Reg (&b)[kLanes][2]) {
  float A[16][16], B[16][8];
  for (int l = 0; l < kLanes; ++l) {
    const int gid = l / 4, tig = l % 4;
    const float av[8] = {a[l][0].lo, a[l][0].hi, a[l][1].lo, a[l][1].hi,
                         a[l][2].lo, a[l][2].hi, a[l][3].lo, a[l][3].hi};
    for (int i = 0; i < 2; ++i) {
      A[gid][2 * tig + i] = av[i];
      A[gid + 8][2 * tig + i] = av[2 + i];
      A[gid][2 * tig + 8 + i] = av[4 + i];
      A[gid + 8][2 * tig + 8 + i] = av[6 + i];
    }
    const float bv[4] = {b[l][0].lo, b[l][0].hi, b[l][1].lo, b[l][1].hi};
    for (int i = 0; i < 2; ++i) {
      B[2 * tig + i][gid] = bv[i];
      B[2 * tig + 8 + i][gid] = bv[2 + i];
    }
  }
  float D[16][8];
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      float acc = 0.0f;
      for (int k = 0; k < 16; ++k) acc += A[r][k] * B[k][c];
      D[r][c] = acc;
    }
  for (int l = 0; l < kLanes; ++l) {
    const int gid = l / 4, tig = l % 4;
    for (int i = 0; i < 2; ++i) {
      d[l][i] += D[gid][2 * tig + i];
      d[l][2 + i] += D[gid + 8][2 * tig + i];
    }
  }
}

// One warp of a kernel: S = A B^T over kD columns for the warp's 16 rows at
// row0 of `a` and kCols rows of `b`, then O = S C with `c` a [kCols][kD]
// tile read by ldmatrix.trans; both against loops. This is the order and
// addressing of every kernel pass pair: (Q K^T, P V) in the forward,
// (K Q^T, P^T dO) and (V dO^T, dS^T Q) in the dK/dV kernel,
// (dO V^T, dS K) in the dQ kernel.
template <int kStride, int kD, int kCols>
void check_warp(const Tile& a, const Tile& b, const Tile& c, int row0, const char* what) {
  constexpr int kScoreTiles = kCols / 8, kKSteps = kD / 16, kSteps = kCols / 16, kOut = kD / 8;
  static float s[kLanes][kScoreTiles][4];
  for (auto& lane : s)
    for (auto& tile : lane)
      for (float& x : tile) x = 0.0f;
  int offset[kLanes];
  for (int ks = 0; ks < kKSteps; ++ks) {
    Reg a_frag[kLanes][4] = {};
    for (int l = 0; l < kLanes; ++l) offset[l] = mma::a_offset<kStride>(row0, ks * 16, l);
    emu_ldmatrix(a, offset, false, a_frag);
    for (int np = 0; np < kScoreTiles / 2; ++np) {
      Reg b_frag[kLanes][4];
      for (int l = 0; l < kLanes; ++l) offset[l] = mma::b_nk_offset<kStride>(np * 16, ks * 16, l);
      emu_ldmatrix(b, offset, false, b_frag);
      float d0[kLanes][4], d1[kLanes][4];
      Reg b01[kLanes][2], b23[kLanes][2];
      for (int l = 0; l < kLanes; ++l) {
        b01[l][0] = b_frag[l][0], b01[l][1] = b_frag[l][1];
        b23[l][0] = b_frag[l][2], b23[l][1] = b_frag[l][3];
        for (int x = 0; x < 4; ++x) d0[l][x] = s[l][2 * np][x], d1[l][x] = s[l][2 * np + 1][x];
      }
      emu_mma(d0, a_frag, b01);
      emu_mma(d1, a_frag, b23);
      for (int l = 0; l < kLanes; ++l)
        for (int x = 0; x < 4; ++x) s[l][2 * np][x] = d0[l][x], s[l][2 * np + 1][x] = d1[l][x];
    }
  }
  // The scores through acc_row / acc_col against the loop; every (row,
  // column) must be held by exactly one (lane, tile, register).
  std::vector<int> seen(16 * kCols, 0);
  for (int l = 0; l < kLanes; ++l)
    for (int n = 0; n < kScoreTiles; ++n)
      for (int x = 0; x < 4; ++x) {
        const int r = mma::acc_row(l, x), col = 8 * n + mma::acc_col(l, x);
        ++seen[r * kCols + col];
        float want = 0.0f;
        for (int k = 0; k < kD; ++k) want += a.at(row0 + r, k) * b.at(col, k);
        CHECK(s[l][n][x] == want, "%s: S[%d][%d] = %g, want %g (lane %d, tile %d, reg %d)", what,
              row0 + r, col, s[l][n][x], want, l, n, x);
      }
  for (int i = 0; i < 16 * kCols; ++i) CHECK(seen[i] == 1, "%s: score element %d held %d times", what, i, seen[i]);

  // Second product: O[16][kD] = round_bf16(S) C.
  static float o[kLanes][kOut][4];
  for (auto& lane : o)
    for (auto& tile : lane)
      for (float& x : tile) x = 0.0f;
  const PackBf16 pack;
  for (int kk = 0; kk < kSteps; ++kk) {
    Reg p_frag[kLanes][4];
    for (int l = 0; l < kLanes; ++l) mma::acc_to_a_with(p_frag[l], s[l], kk, pack);
    for (int dd = 0; dd < kOut / 2; ++dd) {
      Reg b_frag[kLanes][4];
      for (int l = 0; l < kLanes; ++l) offset[l] = mma::b_kn_offset<kStride>(kk * 16, dd * 16, l);
      emu_ldmatrix(c, offset, true, b_frag);
      float d0[kLanes][4], d1[kLanes][4];
      Reg b01[kLanes][2], b23[kLanes][2];
      for (int l = 0; l < kLanes; ++l) {
        b01[l][0] = b_frag[l][0], b01[l][1] = b_frag[l][1];
        b23[l][0] = b_frag[l][2], b23[l][1] = b_frag[l][3];
        for (int x = 0; x < 4; ++x) d0[l][x] = o[l][2 * dd][x], d1[l][x] = o[l][2 * dd + 1][x];
      }
      emu_mma(d0, p_frag, b01);
      emu_mma(d1, p_frag, b23);
      for (int l = 0; l < kLanes; ++l)
        for (int x = 0; x < 4; ++x) o[l][2 * dd][x] = d0[l][x], o[l][2 * dd + 1][x] = d1[l][x];
    }
  }
  for (int l = 0; l < kLanes; ++l)
    for (int n = 0; n < kOut; ++n)
      for (int x = 0; x < 4; ++x) {
        const int r = mma::acc_row(l, x), col = 8 * n + mma::acc_col(l, x);
        float want = 0.0f;
        for (int j = 0; j < kCols; ++j) {
          float score = 0.0f;
          for (int k = 0; k < kD; ++k) score += a.at(row0 + r, k) * b.at(j, k);
          want += round_bf16(score) * c.at(j, col);
        }
        CHECK(o[l][n][x] == want, "%s: O[%d][%d] = %g, want %g (lane %d, tile %d, reg %d)", what,
              row0 + r, col, o[l][n][x], want, l, n, x);
      }
}

// Every warp position of a block, with its traits' shapes.
template <int kStride, int kD, int kCols>
void check_block(int block_rows, const char* what) {
  const Tile a(block_rows, kStride, 1), b(kCols, kStride, 2), c(kCols, kStride, 3);
  for (int row0 = 0; row0 < block_rows; row0 += 16) check_warp<kStride, kD, kCols>(a, b, c, row0, what);
}

// The atomic dQ pass of the dK/dV kernel (add_dq_patch): every warp's dS^T
// accumulators (keys as rows, queries as columns) stored as bf16 pairs into a
// [key][query] tile through acc_row / acc_col, read back as A operands of dS
// by ldmatrix.trans (a_km_offset), times K read by ldmatrix.trans
// (b_kn_offset), the patch split over the warps as the traits say; against
// dS K by loops, each (query, dim) of the patch computed by exactly one lane.
template <int kD>
void check_dq_atomic() {
  using Bwd = FlashBwdMmaTraits<kD, 900>;
  constexpr int kQ = Bwd::kStreamRows, kKeys = Bwd::kBlockRows, kLanesPerWarp = kLanes;
  const Tile x(kKeys, kQ, 4);             // dS^T: row = key, column = query
  const Tile k(kKeys, Bwd::kStride, 5);   // K: row = key, column = dim
  Tile ds(kKeys, Bwd::kDsStride, 6);
  constexpr float kUnwritten = 99.0f;
  for (float& v : ds.v) v = kUnwritten;
  for (int w = 0; w < Bwd::kWarps; ++w)
    for (int l = 0; l < kLanesPerWarp; ++l)
      for (int n = 0; n < Bwd::kScoreTiles; ++n)
        for (int r = 0; r < 2; ++r) {
          // Accumulator registers 2r, 2r + 1 of n8 tile n: (acc_row, 8n + acc_col).
          const int row = 16 * w + mma::acc_row(l, 2 * r), col = 8 * n + mma::acc_col(l, 2 * r);
          CHECK(mma::acc_col(l, 2 * r + 1) == mma::acc_col(l, 2 * r) + 1, "pair columns");
          ds.v[row * ds.stride + col] = round_bf16(x.at(16 * w + mma::acc_row(l, 2 * r), col));
          ds.v[row * ds.stride + col + 1] = round_bf16(x.at(16 * w + mma::acc_row(l, 2 * r + 1), col + 1));
        }
  for (int key = 0; key < kKeys; ++key)
    for (int q = 0; q < kQ; ++q) CHECK(ds.at(key, q) != kUnwritten, "dS^T[%d][%d] not stored", key, q);

  std::vector<int> seen(kQ * kD, 0);
  int offset[kLanes];
  for (int w = 0; w < Bwd::kWarps; ++w) {
    const int m0 = (w / Bwd::kDqWarpsPerM) * 16;
    const int n_first = (w % Bwd::kDqWarpsPerM) * Bwd::kDqOutTiles;
    static float acc[Bwd::kDqOutTiles][kLanes][4];
    for (auto& tile : acc)
      for (auto& lane : tile)
        for (float& v : lane) v = 0.0f;
    for (int ks = 0; ks < Bwd::kBlockSteps; ++ks) {
      Reg a_frag[kLanes][4];
      for (int l = 0; l < kLanes; ++l) offset[l] = mma::a_km_offset<Bwd::kDsStride>(m0, ks * 16, l);
      emu_ldmatrix(ds, offset, true, a_frag);
      for (int dd = 0; dd < Bwd::kDqOutTiles / 2; ++dd) {
        Reg b_frag[kLanes][4];
        for (int l = 0; l < kLanes; ++l)
          offset[l] = mma::b_kn_offset<Bwd::kStride>(ks * 16, (n_first + 2 * dd) * 8, l);
        emu_ldmatrix(k, offset, true, b_frag);
        Reg b01[kLanes][2], b23[kLanes][2];
        for (int l = 0; l < kLanes; ++l) {
          b01[l][0] = b_frag[l][0], b01[l][1] = b_frag[l][1];
          b23[l][0] = b_frag[l][2], b23[l][1] = b_frag[l][3];
        }
        emu_mma(acc[2 * dd], a_frag, b01);
        emu_mma(acc[2 * dd + 1], a_frag, b23);
      }
    }
    for (int l = 0; l < kLanes; ++l)
      for (int n = 0; n < Bwd::kDqOutTiles; ++n)
        for (int c = 0; c < 4; ++c) {
          const int q = m0 + mma::acc_row(l, c), d = 8 * (n_first + n) + mma::acc_col(l, c);
          CHECK(q < kQ && d < kD, "dQ patch element (%d, %d) outside [%d x %d]", q, d, kQ, kD);
          if (q >= kQ || d >= kD) continue;
          ++seen[q * kD + d];
          float want = 0.0f;
          for (int key = 0; key < kKeys; ++key) want += round_bf16(x.at(key, q)) * k.at(key, d);
          CHECK(acc[n][l][c] == want, "dQ[%d][%d] = %g, want %g (warp %d, lane %d)", q, d, acc[n][l][c],
                want, w, l);
        }
  }
  for (int i = 0; i < kQ * kD; ++i) CHECK(seen[i] == 1, "dQ patch element %d computed %d times", i, seen[i]);
}

template <int kD>
void run_head_dim() {
  using Fwd = FlashFwdMmaTraits<kD, 900>;
  using Bwd = FlashBwdMmaTraits<kD, 900>;
  // Forward: each warp's m-tiles at 16-row steps of the query tile; K, V tiles of kBc keys.
  check_block<Fwd::kStride, kD, Fwd::kBc>(Fwd::kBr, "forward");
  // Backward: both kernels have this shape (fixed rows x streamed rows).
  check_block<Bwd::kStride, kD, Bwd::kStreamRows>(Bwd::kBlockRows, "backward");
  check_dq_atomic<kD>();
  std::printf("D = %3d: forward %3dx%-3d %6d B smem; backward %3dx%-3d %6d B smem %d blocks/SM\n", kD,
              Fwd::kBr, Fwd::kBc, Fwd::kSmemBytes, Bwd::kBlockRows, Bwd::kStreamRows, Bwd::kSmemBytes,
              Bwd::kMinBlocksPerSm);
}

// The backward's shared memory: two fixed [64][kD + 8] tiles, two
// double-buffered streamed ones, dS^T [64][kStreamRows + 8], and lse / delta
// of two query tiles.
template <int kD, int kArch>
constexpr bool bwd_smem_matches() {
  using B = FlashBwdMmaTraits<kD, kArch>;
  constexpr int elems = (2 * 64 + 4 * B::kStreamRows) * (kD + 8) + 64 * (B::kStreamRows + 8);
  return B::kSmemBytes == elems * 2 + 4 * B::kStreamRows * 4 && B::kNeedsSmemOptIn;
}
static_assert(bwd_smem_matches<64, 800>() && bwd_smem_matches<128, 800>());
static_assert(bwd_smem_matches<64, 900>() && bwd_smem_matches<128, 900>());
static_assert(FlashBwdMmaTraits<64, 900>::kSmemBytes == 65536);
static_assert(FlashBwdMmaTraits<128, 900>::kSmemBytes == 75264);

}  // namespace

int main() {
  run_head_dim<64>();
  run_head_dim<128>();
  std::printf("%d checks, %d failed\n", g_checks, g_failures);
  if (g_failures != 0) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("flash mma emulation: all checks passed\n");
  return 0;
}
