// Counter-based random numbers for dropout: Philox4x32-10 (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the generator
// cuRAND and PyTorch's CUDA dropout use. Four 32-bit outputs are a pure
// function of a 128-bit counter and a 64-bit key, so a dropout mask element
// can be computed, in any order and on any thread or rank, from its
// coordinates alone:
//
//   key     = the run's seed (64 bits)
//   counter = {g, (site << 16) | position, global row, step}
//   output  = 4 uniform 32-bit words, for 4 channels of the row (counter_of
//             and word_of below say which)
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

// Channel c of a row is word k of counter g with
//   c = 64 b + 16 k + l,  g = 16 b + l  (0 <= k < 4, 0 <= l < 16):
// the 4 words of 16 consecutive counters cover 64 consecutive channels, so
// 16 counters run in vector lanes and each word vector is one store.
static inline int64_t counter_of(int64_t channel) { return channel / 64 * 16 + channel % 16; }
static inline int word_of(int64_t channel) { return static_cast<int>(channel / 16 % 4); }

// The 4 words of counter g at (row, position).
static inline void words(const DropoutStream& s, int64_t row, int64_t position, int64_t g,
                         uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(g);
  uint32_t c1 = (s.site << 16) | static_cast<uint32_t>(position & 0xFFFF);
  uint32_t c2 = static_cast<uint32_t>(s.first_row + row);
  uint32_t c3 = s.step;
  rounds(c0, c1, c2, c3, static_cast<uint32_t>(s.seed), static_cast<uint32_t>(s.seed >> 32));
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

// 16 lanes of 32 bits, and the same bytes as 8 lanes of 64 (lane 2j is the
// low half of 64-bit lane j): GCC vector extensions, split into as many
// registers as the instruction set needs.
typedef uint32_t U32x16 __attribute__((vector_size(64)));
typedef uint64_t U64x8 __attribute__((vector_size(64)));

// {high, low} 32-bit halves of a * m in every lane.
static inline void mulhilo(U32x16 a, uint32_t m, U32x16& hi, U32x16& lo) {
  constexpr uint64_t kLow = 0xFFFFFFFFull;
  const U64x8 wide = (U64x8)a;  // a vector cast reinterprets the bits
  const U64x8 even = (wide & kLow) * static_cast<uint64_t>(m);  // lanes 2j
  const U64x8 odd = (wide >> 32) * static_cast<uint64_t>(m);    // lanes 2j + 1
  const U64x8 lo64 = (even & kLow) | (odd << 32);
  const U64x8 hi64 = (even >> 32) | (odd & ~kLow);
  lo = (U32x16)lo64;
  hi = (U32x16)hi64;
}

// Multipliers of `n` channels at (row, position): 0 (dropped) or 1/(1-p).
template <typename T>
static inline void mask_row(const DropoutStream& s, int64_t row, int64_t position, int64_t n,
                            T* out) {
  const uint32_t threshold = keep_threshold(s.p);
  const T scale = static_cast<T>(1.0 / (1.0 - static_cast<double>(s.p)));
  const uint32_t c1 = (s.site << 16) | static_cast<uint32_t>(position & 0xFFFF);
  const uint32_t c2 = static_cast<uint32_t>(s.first_row + row);
  const U32x16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  for (int64_t base = 0; base < n; base += 64) {
    U32x16 a = lane + static_cast<uint32_t>(base / 64 * 16);
    U32x16 b = U32x16{} + c1, c = U32x16{} + c2, d = U32x16{} + s.step;
    uint32_t ka = static_cast<uint32_t>(s.seed), kb = static_cast<uint32_t>(s.seed >> 32);
    for (int r = 0; r < 10; ++r) {
      U32x16 hi0, lo0, hi1, lo1;
      mulhilo(a, kMul0, hi0, lo0);
      mulhilo(c, kMul1, hi1, lo1);
      a = hi1 ^ b ^ ka;
      b = lo1;
      c = hi0 ^ d ^ kb;
      d = lo0;
      ka += kWeyl0, kb += kWeyl1;
    }
    const U32x16 w[4] = {a, b, c, d};
    for (int k = 0; k < 4; ++k) {
      const int64_t c0 = base + 16 * k;
      if (c0 >= n) break;
      const int64_t m = n - c0 < 16 ? n - c0 : 16;
      for (int64_t l = 0; l < m; ++l) out[c0 + l] = w[k][l] >= threshold ? scale : T(0);
    }
  }
}

}  // namespace nmt::ops::philox
