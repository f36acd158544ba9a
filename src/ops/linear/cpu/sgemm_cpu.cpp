// See sgemm_cpu.h. Sizes: a B panel (kKc x kNr) is 16 KiB and stays in L1
// beside the A panel it meets; a block of A (kMc x kKc, 96 KiB with AVX2)
// stays in L2 while every B panel of the pass goes by; a pass of B (kKc x
// kNc, at most 4 MiB, two kept: the next is packed beside the last) is
// packed once and read once per block of A.
#include "ops/linear/cpu/sgemm_cpu.h"

#include <omp.h>

#include <algorithm>

#include "ops/cpu_parallel.h"
#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

using detail::AlignedBuffer;
using detail::kAccRegs;
using detail::kLanes;
using detail::round_up;
using detail::Vec;
using detail::vec_load;
using detail::vec_loadu;
using detail::vec_set1;
using detail::vec_store;
using detail::vec_storeu;
using detail::vec_transpose;

constexpr int kVecs = 2;                                        // vectors of C's columns in a tile row
constexpr int64_t kNr = kVecs * kLanes<float>;                  // tile columns: 32 / 16 / 8
constexpr int64_t kMr = kAccRegs / kVecs;                       // tile rows: 12 / 6 / 6
constexpr int64_t kKc = 16384 / (kNr * int64_t{sizeof(float)});  // k per pass: 128 / 256 / 512
constexpr int64_t kMc = 96;                                     // rows of A per block
constexpr int64_t kNc = 4096;                                   // columns of B per pass
static_assert(kMc % kMr == 0, "a block of A is whole panels");
static_assert(kNc % kNr == 0, "a pass of B is whole panels");

// Below this many flops a product runs on the calling thread alone: a team's
// start and its barriers cost more than they share out.
constexpr double kTeamFlop = 1 << 21;

// acc = Σ_q a[q] ⊗ b[q] over the pass, then the tile of C = alpha · acc +
// beta · C (beta 0: C is not read).
//   a: [kc][kMr] (a panel of op(A)), b: [kc][kNr] (a panel of op(B), 64-byte aligned)
//   c: the tile's first element, rows ldc apart; mr x nr of it are C's (mr ≤ kMr, nr ≤ kNr)
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, float alpha, float beta,
                  int64_t mr, int64_t nr) {
  // Zeroed one by one: with `= {}` GCC also cleared a copy of the array on
  // the stack (`rep stos`, 384 bytes) every call, 3% of the kernel's
  // samples on an AMD EPYC (Zen 3), besides the registers the loop uses.
  Vec<float> acc[kMr][kVecs];
#pragma GCC unroll 16
  for (int64_t r = 0; r < kMr; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[r][v] = vec_set1(0.0f);
  // The tile of C is read and written only at the end: ask for its lines
  // now, so that the pass does not wait for them there (a larger C than L2
  // holds ran 5-10% slower without).
  for (int64_t r = 0; r < kMr; ++r) {
    __builtin_prefetch(c + r * ldc, 1);
    __builtin_prefetch(c + r * ldc + kNr - 1, 1);
  }
#pragma GCC unroll 4
  for (int64_t q = 0; q < kc; ++q, a += kMr, b += kNr) {
    Vec<float> bv[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) bv[v] = vec_load(b + v * kLanes<float>);
#pragma GCC unroll 16
    for (int64_t r = 0; r < kMr; ++r) {
      const Vec<float> x = vec_set1(a[r]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] += x * bv[v];
    }
  }
  const Vec<float> va = vec_set1(alpha), vb = vec_set1(beta);
  if (mr == kMr && nr == kNr) {
    for (int64_t r = 0; r < kMr; ++r)
      for (int v = 0; v < kVecs; ++v) {
        float* cv = c + r * ldc + v * kLanes<float>;
        vec_storeu(cv, beta == 0 ? va * acc[r][v] : va * acc[r][v] + vb * vec_loadu(cv));
      }
    return;
  }
  // An edge tile: only its mr x nr elements are C's.
  alignas(64) float tile[kMr][kNr];
  for (int64_t r = 0; r < kMr; ++r)
    for (int v = 0; v < kVecs; ++v) vec_store(&tile[r][v * kLanes<float>], acc[r][v]);
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j)
      c[r * ldc + j] = beta == 0 ? alpha * tile[r][j] : alpha * tile[r][j] + beta * c[r * ldc + j];
}

// One panel of kWidth columns over the pass: out[q][j] = X(q, j) for q <
// kc and j < used, zeros past used, where X(q, j) is x[q * ld + j] when
// the panel's columns lie side by side in memory (across), x[j * ld + q]
// when each runs along q. A panel of B is op(B)'s columns; a panel of A is
// op(A)'s rows, so that the micro-kernel reads both the same way.
//
// Along q, the panel's kWidth sources are read together, so that the writes
// go in order. Written source by source (kc floats to every kWidth-th
// place), the pack of A took a fifth of the time of a product with few
// columns (n = 256) on an AMD EPYC: the writes ran through memory kWidth
// times faster than the reads, whose addresses kept meeting theirs 4 KiB
// apart, and a load that seems to meet a store waits for it.
template <int64_t kWidth>
void pack_panel(const float* x, int64_t ld, bool across, int64_t used, int64_t kc, float* out) {
  constexpr int L = kLanes<float>;
  if (across) {
    for (int64_t q = 0; q < kc; ++q, out += kWidth) {
      const float* src = x + q * ld;
      if constexpr (kWidth % L == 0) {
        if (used == kWidth) {
          for (int64_t j = 0; j < kWidth; j += L) vec_store(out + j, vec_loadu(src + j));
          continue;
        }
      }
      for (int64_t j = 0; j < used; ++j) out[j] = src[j];
      for (int64_t j = used; j < kWidth; ++j) out[j] = 0;
    }
  } else if (used == kWidth) {
    // Each of the kWidth sources runs along q: L values of q from L sources
    // (zeros past kWidth) are turned over in registers (vec_transpose) and
    // written as L rows of the panel, instead of one float at a time through
    // scalar loads and stores: on an AVX2-only AMD EPYC (Zen 3) A . B and
    // A . Bᵀ at a step's shapes ran 1-9% faster (A's panels of the first,
    // B's of the second), against oneDNN in the same run, 4 rounds.
    constexpr int64_t kGroups = (kWidth + L - 1) / L;
    int64_t q = 0;
    for (; q + L <= kc; q += L) {
      Vec<float> t[kGroups][L];
#pragma GCC unroll 4
      for (int64_t g = 0; g < kGroups; ++g) {
#pragma GCC unroll 16
        for (int l = 0; l < L; ++l)
          t[g][l] = g * L + l < kWidth ? vec_loadu(x + (g * L + l) * ld + q) : Vec<float>{};
        vec_transpose<float>(t[g]);
      }
      // Rows in order, groups in order: a group narrower than L (the last,
      // or A's 6 of 8) writes past its row into the next row's first
      // lanes, which that row then writes over; the panel's last row only
      // writes its own.
      float* row = out + q * kWidth;
#pragma GCC unroll 16
      for (int l = 0; l < L; ++l, row += kWidth)
#pragma GCC unroll 4
        for (int64_t g = 0; g < kGroups; ++g) {
          const int64_t count = std::min<int64_t>(L, kWidth - g * L);
          if (count == L || q + l + 1 < kc) {
            vec_storeu(row + g * L, t[g][l]);
          } else {
            for (int64_t j = 0; j < count; ++j) row[g * L + j] = t[g][l][j];
          }
        }
    }
    for (out += q * kWidth; q < kc; ++q, out += kWidth)
#pragma GCC unroll 32
      for (int64_t j = 0; j < kWidth; ++j) out[j] = x[j * ld + q];
  } else {
    for (int64_t q = 0; q < kc; ++q, out += kWidth)
      for (int64_t j = 0; j < kWidth; ++j) out[j] = j < used ? x[j * ld + q] : 0.0f;
  }
}

// Rows [i0, i0 + rows) of op(A), k in [pc, pc + kc), as panels of kMr rows:
// out[panel][q][r]. A stored [k, m] (trans_a) has a panel's rows side by side.
void pack_a(const GemmParams<float>& p, int64_t i0, int64_t rows, int64_t pc, int64_t kc, float* out) {
  for (int64_t r0 = 0; r0 < rows; r0 += kMr, out += kc * kMr) {
    const int64_t i = i0 + r0;
    pack_panel<kMr>(p.trans_a ? p.a + pc * p.lda + i : p.a + i * p.lda + pc, p.lda, p.trans_a,
                    std::min(kMr, rows - r0), kc, out);
  }
}

// Columns [j0, j0 + kNr) of op(B), k in [pc, pc + kc), as one panel:
// out[q][j]. B stored [k, n] (not trans_b) has the columns side by side.
void pack_b_panel(const GemmParams<float>& p, int64_t j0, int64_t pc, int64_t kc, float* out) {
  pack_panel<kNr>(p.trans_b ? p.b + j0 * p.ldb + pc : p.b + pc * p.ldb + j0, p.ldb, !p.trans_b,
                  std::min(kNr, p.n - j0), kc, out);
}

// C = beta · C over [m, n] (beta 0: zeros, C not read): a product with no k.
void scale_c(const GemmParams<float>& p) {
  for (int64_t i = 0; i < p.m; ++i) {
    float* c = p.c + i * p.ldc;
    for (int64_t j = 0; j < p.n; ++j) c[j] = p.beta == 0 ? 0.0f : p.beta * c[j];
  }
}

}  // namespace

void sgemm(const GemmParams<float>& p) {
  if (p.m <= 0 || p.n <= 0) return;
  if (p.k <= 0 || p.alpha == 0) return scale_c(p);
  // Two passes of B live with the calling thread (the team's first), grown
  // as needed and kept: a new one each call would fault its pages in again.
  // Passes alternate between them, so one barrier a pass keeps the team in
  // step: a thread packing the next pass into the other buffer has passed
  // the barrier every thread reaches only after its tiles of the last pass
  // that used that buffer.
  thread_local AlignedBuffer<float> b_pack;
  thread_local int64_t b_capacity = 0;
  const int64_t b_pass = std::min(kKc, p.k) * std::min(kNc, round_up(p.n, kNr));
  if (b_capacity < 2 * b_pass) b_pack.reset(2 * b_pass), b_capacity = 2 * b_pass;
  float* const b_buffers = b_pack.data();  // the team reads this thread's buffer, not its own
  const bool team = !detail::alone() && 2.0 * p.m * p.n * p.k >= kTeamFlop;
  const int64_t blocks = (p.m + kMc - 1) / kMc;

  const auto body = [&] {
    const int64_t tid = team ? omp_get_thread_num() : 0, threads = team ? omp_get_num_threads() : 1;
    thread_local AlignedBuffer<float> a_pack(kMc * kKc);
    int64_t pass = 0;
    for (int64_t jc = 0; jc < p.n; jc += kNc) {
      const int64_t panels = (std::min(kNc, p.n - jc) + kNr - 1) / kNr;
      for (int64_t pc = 0; pc < p.k; pc += kKc, ++pass) {
        const int64_t kc = std::min(kKc, p.k - pc);
        float* const bt = b_buffers + pass % 2 * b_pass;
        // pass 1: the team packs this pass of B, panel by panel.
        for (int64_t q = tid; q < panels; q += threads) pack_b_panel(p, jc + q * kNr, pc, kc, bt + q * kc * kNr);
        if (team) {
#pragma omp barrier
        }
        // pass 2: the tiles (block of A, panel of B, panel of A within the
        // block, in that order) shared out in equal runs, one per thread;
        // a thread packs each block of A its run enters.
        const float beta = pc == 0 ? p.beta : 1.0f;  // later passes add to the first
        const int64_t tiles = panels * ((p.m + kMr - 1) / kMr);
        const int64_t t0 = tiles * tid / threads, t1 = tiles * (tid + 1) / threads;
        int64_t first = 0;  // the first tile of block ib
        for (int64_t ib = 0; ib < blocks && first < t1; ++ib) {
          const int64_t i0 = ib * kMc, rows = std::min(kMc, p.m - i0);
          const int64_t row_panels = (rows + kMr - 1) / kMr, count = panels * row_panels;
          const int64_t lo = std::max(t0, first), hi = std::min(t1, first + count);
          if (lo < hi) {
            pack_a(p, i0, rows, pc, kc, a_pack.data());
            for (int64_t t = lo - first; t < hi - first; ++t) {
              const int64_t q = t / row_panels, r0 = t % row_panels * kMr, j0 = jc + q * kNr;
              micro_kernel(kc, a_pack.data() + r0 * kc, bt + q * kc * kNr, p.c + (i0 + r0) * p.ldc + j0, p.ldc,
                           p.alpha, beta, std::min(kMr, rows - r0), std::min(kNr, p.n - j0));
            }
          }
          first += count;
        }
      }
    }
  };
  if (team) {
#pragma omp parallel
    body();
  } else {
    body();
  }
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
