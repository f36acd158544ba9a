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
#include <cstring>
#if defined(__SSE2__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

// The scalar parts run on a GPU too (src/ops/random/cuda/dropout_kernel.cu):
// one definition of the generator for every device.
#if defined(__CUDACC__)
#define NMT_PHILOX_HD __host__ __device__ inline
#else
#define NMT_PHILOX_HD static inline
#endif

namespace nmt::ops::philox {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

// One Philox4x32-10 evaluation, in place on the counter words.
NMT_PHILOX_HD void rounds(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
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
  // Rows of sentences packed one after another (the training encoder's, CPU
  // kernels only): sentence b's rows start at row_starts[b] ([sentences + 1]),
  // and each draws at its padded coordinates (mask_coords). Null: [B, T, C].
  const int64_t* row_starts = nullptr;
  int64_t sentences = 0;
};

// The (batch row, position) row r of a [rows, C] tensor draws its mask at:
// r / positions and r % positions for [B, T, C] rows; with packed rows, its
// sentence (the last whose first row is <= r) and its place in it, as in
// the padded tensor.
struct MaskCoords {
  int64_t row, position;
};
NMT_PHILOX_HD MaskCoords mask_coords(const DropoutStream& s, int64_t r, int64_t positions) {
  if (s.row_starts == nullptr) return {r / positions, r % positions};
  int64_t lo = 0, hi = s.sentences;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (s.row_starts[mid] <= r) lo = mid; else hi = mid;
  }
  return {lo, r - s.row_starts[lo]};
}

// Keep threshold: a word u keeps its element when u >= threshold, which
// happens with probability 1 - p (to within 2^-32).
NMT_PHILOX_HD uint32_t keep_threshold(float p) {
  const double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

// Channel c of a row is word k of counter g with
//   c = 64 b + 16 k + l,  g = 16 b + l  (0 <= k < 4, 0 <= l < 16):
// the 4 words of 16 consecutive counters cover 64 consecutive channels, so
// 16 counters run in vector lanes and each word vector is one store.
NMT_PHILOX_HD int64_t counter_of(int64_t channel) { return channel / 64 * 16 + channel % 16; }
NMT_PHILOX_HD int word_of(int64_t channel) { return static_cast<int>(channel / 16 % 4); }

// The 4 words of counter g at (row, position).
NMT_PHILOX_HD void words(const DropoutStream& s, int64_t row, int64_t position, int64_t g,
                         uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(g);
  uint32_t c1 = (s.site << 16) | static_cast<uint32_t>(position & 0xFFFF);
  uint32_t c2 = static_cast<uint32_t>(s.first_row + row);
  uint32_t c3 = s.step;
  rounds(c0, c1, c2, c3, static_cast<uint32_t>(s.seed), static_cast<uint32_t>(s.seed >> 32));
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

#if !defined(__CUDACC__)  // the vectorised CPU path
// One vector register of 32-bit lanes for the instruction set this copy of
// the kernels is compiled for (GCC vector extensions). A vector wider than
// the registers (16 lanes under AVX2) made GCC's code ~6x slower.
#if defined(__AVX512F__)
inline constexpr int kLanes = 16;
#elif defined(__AVX2__)
inline constexpr int kLanes = 8;
#else
inline constexpr int kLanes = 4;
#endif
typedef uint32_t U32xN __attribute__((vector_size(4 * kLanes)));
typedef int32_t I32xN __attribute__((vector_size(4 * kLanes)));
typedef uint64_t U64xN __attribute__((vector_size(4 * kLanes)));  // the same bytes as kLanes / 2 lanes of 64

// {high, low} 32-bit halves of a * m in every lane: the 32 x 32 -> 64-bit
// products of the even lanes and of the odd lanes (shifted down). Under
// AVX-512, AVX2 and SSE2 each is one vpmuludq/pmuludq: GCC's code for the
// generic form multiplies all 64 bits, with AVX-512's vpmullq (three
// micro-ops: a mask row took 1.8x as long) or with no instruction of its own.
static inline void mulhilo(U32xN a, uint32_t m, U32xN& hi, U32xN& lo) {
#if defined(__AVX512F__)
  // The zero-masked multiply with every lane on, and shifts as vector
  // operators: the same instructions, without GCC 12's unmasked AVX-512
  // intrinsics, whose _mm512_undefined_epi32() warned (-Wmaybe-uninitialized)
  // at every inlined call.
  const __m512i va = (__m512i)a, vm = _mm512_set1_epi64(m);
  const __m512i even = _mm512_maskz_mul_epu32(0xFF, va, vm);
  const __m512i odd = _mm512_maskz_mul_epu32(0xFF, (__m512i)((U64xN)va >> 32), vm);
  lo = (U32xN)_mm512_mask_blend_epi32(0xAAAA, even, (__m512i)((U64xN)odd << 32));
  hi = (U32xN)_mm512_mask_blend_epi32(0xAAAA, (__m512i)((U64xN)even >> 32), odd);
#elif defined(__AVX2__)
  const __m256i va = (__m256i)a, vm = _mm256_set1_epi64x(m);
  const __m256i even = _mm256_mul_epu32(va, vm);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(va, 32), vm);
  lo = (U32xN)_mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = (U32xN)_mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
#elif defined(__SSE2__) && !defined(__AVX2__)
  const __m128i va = (__m128i)a, vm = _mm_set1_epi64x(m), low = _mm_set1_epi64x(0xFFFFFFFFll);
  const __m128i even = _mm_mul_epu32(va, vm);
  const __m128i odd = _mm_mul_epu32(_mm_srli_epi64(va, 32), vm);
  lo = (U32xN)_mm_or_si128(_mm_and_si128(even, low), _mm_slli_epi64(odd, 32));
  hi = (U32xN)_mm_or_si128(_mm_srli_epi64(even, 32), _mm_andnot_si128(low, odd));
#else
  // Targets without x86 intrinsics.
  constexpr uint64_t kLow = 0xFFFFFFFFull;
  const U64xN wide = (U64xN)a;  // a vector cast reinterprets the bits
  const U64xN even = (wide & kLow) * static_cast<uint64_t>(m);  // lanes 2j
  const U64xN odd = (wide >> 32) * static_cast<uint64_t>(m);    // lanes 2j + 1
  lo = (U32xN)((even & kLow) | (odd << 32));
  hi = (U32xN)((even >> 32) | (odd & ~kLow));
#endif
}

// Multipliers of channels [first_channel, first_channel + n) at (row,
// position): 0 (dropped) or 1/(1-p), into out[0 .. n). Each 64 channels are
// 16 counters' 4 words (counter_of, word_of), drawn kLanes counters at a
// time; first_channel is a multiple of 64, where a run of counters starts.
template <typename T>
static inline void mask_row(const DropoutStream& s, int64_t row, int64_t position, int64_t n,
                            T* out, int64_t first_channel = 0) {
  const uint32_t threshold = keep_threshold(s.p);
  const T scale = static_cast<T>(1.0 / (1.0 - static_cast<double>(s.p)));
  int32_t scale_bits = 0;  // float only: the kept lanes' bit pattern
  if constexpr (sizeof(T) == 4) std::memcpy(&scale_bits, &scale, 4);
  const uint32_t c1 = (s.site << 16) | static_cast<uint32_t>(position & 0xFFFF);
  const uint32_t c2 = static_cast<uint32_t>(s.first_row + row);
  U32xN lane;
  for (int l = 0; l < kLanes; ++l) lane[l] = static_cast<uint32_t>(l);
  for (int64_t base = 0; base < n; base += 64) {
    for (int sub = 0; sub < 16; sub += kLanes) {
      if (base + sub >= n) break;  // no channel of these counters is wanted
      U32xN a = lane + static_cast<uint32_t>((first_channel + base) / 64 * 16 + sub);
      U32xN b = U32xN{} + c1, c = U32xN{} + c2, d = U32xN{} + s.step;
      uint32_t ka = static_cast<uint32_t>(s.seed), kb = static_cast<uint32_t>(s.seed >> 32);
      for (int r = 0; r < 10; ++r) {
        U32xN hi0, lo0, hi1, lo1;
        mulhilo(a, kMul0, hi0, lo0);
        mulhilo(c, kMul1, hi1, lo1);
        a = hi1 ^ b ^ ka;
        b = lo1;
        c = hi0 ^ d ^ kb;
        d = lo0;
        ka += kWeyl0, kb += kWeyl1;
      }
      const U32xN w[4] = {a, b, c, d};
      for (int k = 0; k < 4; ++k) {
        const int64_t c0 = base + 16 * k + sub;
        if (c0 >= n) break;
        if constexpr (sizeof(T) == 4) {
          if (n - c0 >= kLanes) {  // a whole vector: one compare and one mask
            const I32xN v = (I32xN)(w[k] >= threshold) & scale_bits;
            std::memcpy(out + c0, &v, sizeof v);
            continue;
          }
        }
        const int64_t m = n - c0 < kLanes ? n - c0 : kLanes;
        for (int64_t l = 0; l < m; ++l) out[c0 + l] = w[k][l] >= threshold ? scale : T(0);
      }
    }
  }
}

#endif  // !__CUDACC__

}  // namespace nmt::ops::philox
