// Counter-based random numbers for dropout: Philox4x32-10 (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the generator
// cuRAND and PyTorch's CUDA dropout use. Four 32-bit outputs are a pure
// function of a 128-bit counter and a 64-bit key, so a dropout mask element
// can be computed, in any order and on any thread or rank, from its
// coordinates alone:
//
//   key     = the run's seed (64 bits)
//   counter = {channel / 4, (site << 16) | position, global row, step}
//   output  = 4 uniform 32-bit words: channels 4k .. 4k+3
//
// The backward pass recomputes the masks instead of storing them, a resumed
// run draws the masks it would have drawn, and N ranks that each hold some
// rows of a global batch draw exactly the masks one process would.
// Plain C++, header only; `static inline` keeps each instruction-set copy of
// the kernels self-contained.
#pragma once

#include <cstdint>

namespace nmt::ops::philox {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

// One Philox4x32-10 evaluation, in place on the counter words.
static inline void rounds(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
                          uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
}

// Where a dropout site draws from. One per dropout call in the model.
struct DropoutStream {
  uint64_t seed = 0;
  uint32_t step = 0;        // optimizer step: a new mask every step
  uint32_t site = 0;        // which dropout in the model (< 2^16)
  int64_t first_row = 0;    // global batch row of this rank's row 0
  float p = 0;              // drop probability; 0 = no dropout
};

// Keep threshold: a word u keeps its element when u >= threshold, which
// happens with probability 1 - p (to within 2^-32).
static inline uint32_t keep_threshold(float p) {
  const double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

// The 4 words for channels 4*group .. 4*group+3 at (row, position).
static inline void words(const DropoutStream& s, int64_t row, int64_t position, int64_t group,
                         uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(group);
  uint32_t c1 = (s.site << 16) | static_cast<uint32_t>(position & 0xFFFF);
  uint32_t c2 = static_cast<uint32_t>(s.first_row + row);
  uint32_t c3 = s.step;
  rounds(c0, c1, c2, c3, static_cast<uint32_t>(s.seed), static_cast<uint32_t>(s.seed >> 32));
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

// Multipliers of `n` channels at (row, position): 0 (dropped) or 1/(1-p).
// 16 counters at a time so that the rounds vectorize.
template <typename T>
static inline void mask_row(const DropoutStream& s, int64_t row, int64_t position, int64_t n,
                            T* out) {
  const uint32_t threshold = keep_threshold(s.p);
  const T scale = static_cast<T>(1.0 / (1.0 - static_cast<double>(s.p)));
  constexpr int kLanes = 16;
  const uint32_t c1 = (s.site << 16) | static_cast<uint32_t>(position & 0xFFFF);
  const uint32_t c2 = static_cast<uint32_t>(s.first_row + row);
  const uint32_t k0 = static_cast<uint32_t>(s.seed), k1 = static_cast<uint32_t>(s.seed >> 32);
  for (int64_t g0 = 0; g0 * 4 < n; g0 += kLanes) {
    uint32_t a[kLanes], b[kLanes], c[kLanes], d[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      a[l] = static_cast<uint32_t>(g0 + l), b[l] = c1, c[l] = c2, d[l] = s.step;
    }
    uint32_t ka = k0, kb = k1;
    for (int r = 0; r < 10; ++r) {
      for (int l = 0; l < kLanes; ++l) {
        const uint64_t p0 = static_cast<uint64_t>(kMul0) * a[l];
        const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[l];
        const uint32_t na = static_cast<uint32_t>(p1 >> 32) ^ b[l] ^ ka;
        const uint32_t nc = static_cast<uint32_t>(p0 >> 32) ^ d[l] ^ kb;
        b[l] = static_cast<uint32_t>(p1);
        d[l] = static_cast<uint32_t>(p0);
        a[l] = na, c[l] = nc;
      }
      ka += kWeyl0, kb += kWeyl1;
    }
    const int64_t base = g0 * 4;
    const uint32_t* w[4] = {a, b, c, d};
    for (int l = 0; l < kLanes; ++l)
      for (int k = 0; k < 4; ++k) {
        const int64_t i = base + l * 4 + k;
        if (i < n) out[i] = w[k][l] >= threshold ? scale : T(0);
      }
  }
}

}  // namespace nmt::ops::philox
