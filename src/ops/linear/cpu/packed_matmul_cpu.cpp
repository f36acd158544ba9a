#include "ops/linear/cpu/packed_matmul_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ops/cpu_parallel.h"
#include "ops/cpu_simd.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

using detail::kLanes;
using detail::Vec;
using detail::vec_loadu;
using detail::vec_set1;
using detail::vec_storeu;

// Scratch that only grows: one per thread and use (not std::vector, whose
// out-of-line members would be weak symbols shared by every ISA's copy).
template <typename T>
struct Scratch {
  detail::AlignedBuffer<T> buffer;
  int64_t capacity = 0;
  T* get(int64_t n) {
    if (n > capacity) buffer.reset(n), capacity = n;
    return buffer.data();
  }
};

// Whether a product is worth more than one thread (as rows_matmul decides).
bool worth_threads(int64_t rows, int64_t in, int64_t out) {
  return panels(out) > 1 && rows * in * out > (int64_t{1} << 18);
}

// ---------------------------------------------------------------- int8

// x's rows as int8, k zero-padded to `stride`: qx = round(x / x_scale),
// x_scale = max|x| / 127 (0 for a row of zeros, whose qx are all 0). Adding
// and subtracting 1.5 · 2^23 rounds to nearest even (|x / x_scale| <= 127);
// the same float operations in every ISA copy, so every kernel sees the
// same integers. A row with a non-finite value gets qx = 0 and a NaN scale:
// its outputs are NaN, as float32's would be.
void quantize_rows(const Int8MatmulParams& p, int64_t stride, int8_t* q, float* scale) {
  constexpr int L = kLanes<float>;
  using Bits = typename detail::Simd<float>::Bits;
  using Ints = typename detail::Simd<float>::Mask;  // int32 lanes
  typedef int8_t Bytes __attribute__((vector_size(L)));
  constexpr float kMagic = 12582912.0f;
  for (int64_t m = 0; m < p.rows; ++m) {
    const float* x = p.x + m * p.x_stride;
    Vec<float> vmax{}, vzero{};  // vzero: Σ x · 0, NaN once any x is NaN or infinite
    int64_t k = 0;
    for (; k + L <= p.in; k += L) {
      const Vec<float> v = vec_loadu(x + k);
      const Vec<float> a = detail::bit_cast<Vec<float>>(detail::bit_cast<Bits>(v) & 0x7fffffffu);
      vmax = a > vmax ? a : vmax;
      vzero += v * 0.0f;
    }
    float amax = detail::vec_hmax(vmax), zero = detail::vec_sum(vzero);
    for (; k < p.in; ++k) amax = std::max(amax, std::fabs(x[k])), zero += x[k] * 0.0f;
    const bool finite = zero == 0.0f;
    scale[m] = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    const float inv = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
    int8_t* row = q + m * stride;
    k = 0;
    for (; k + L <= p.in; k += L) {
      const Vec<float> r = (vec_loadu(x + k) * inv + kMagic) - kMagic;
      const Bytes b = __builtin_convertvector(__builtin_convertvector(r, Ints), Bytes);
      std::memcpy(row + k, &b, sizeof b);
    }
    for (; k < p.in; ++k) row[k] = static_cast<int8_t>(static_cast<int32_t>((x[k] * inv + kMagic) - kMagic));
    std::fill(row + p.in, row + stride, int8_t{0});
  }
}

// Rows [m0, m0 + rows) of panel `panel` from their int32 sums, minus the
// unsigned kernel's shift (128 · w_sum where it fed qx + 128).
void int8_epilogue(const Int8MatmulParams& p, const int32_t (*sums)[kPanel], int rows, int64_t m0,
                   int64_t panel, const float* x_scale, int32_t shift) {
  const int64_t n0 = panel * kPanel, width = std::min(kPanel, p.out - n0);
  for (int r = 0; r < rows; ++r) {
    const float xs = x_scale[m0 + r];
    float* y = p.y + (m0 + r) * p.out + n0;
    for (int64_t c = 0; c < width; ++c)
      y[c] = static_cast<float>(sums[r][c] - shift * p.w_sum[n0 + c]) * (xs * p.w_scale[n0 + c]) + p.bias[n0 + c];
  }
}

#if defined(__AVX512F__)
// AVX-512 VNNI: a tile of R rows × the panel's 64 columns (4 registers of
// 16 int32 sums each); per group of 4 k, 4 loads of w and one vpdpbusd per
// row and register. qx arrives as qx + 128 (unsigned bytes).
constexpr int kInt8Rows = 6;
constexpr int32_t kInt8Shift = 128;
#pragma GCC push_options
#pragma GCC target("avx512vnni")
template <int R>
void int8_tile(const uint8_t* qx, int64_t stride, const int8_t* w, int64_t kq, int32_t (*sums)[kPanel]) {
  // Accumulators as GCC vectors, not __m512i: an array of __m512i stays in
  // memory (a store per instruction), these stay in 24 registers.
  typedef int32_t Acc __attribute__((vector_size(64)));
  Acc acc[R][4] = {};
  for (int64_t g = 0; g < kq; ++g) {
    const int8_t* wg = w + g * kPanel * kInt8Group;
    const __m512i w0 = _mm512_loadu_si512(wg), w1 = _mm512_loadu_si512(wg + 64);
    const __m512i w2 = _mm512_loadu_si512(wg + 128), w3 = _mm512_loadu_si512(wg + 192);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, qx + r * stride + g * kInt8Group, sizeof four);
      const __m512i xb = _mm512_set1_epi32(four);
      acc[r][0] = (Acc)_mm512_dpbusd_epi32((__m512i)acc[r][0], xb, w0);
      acc[r][1] = (Acc)_mm512_dpbusd_epi32((__m512i)acc[r][1], xb, w1);
      acc[r][2] = (Acc)_mm512_dpbusd_epi32((__m512i)acc[r][2], xb, w2);
      acc[r][3] = (Acc)_mm512_dpbusd_epi32((__m512i)acc[r][3], xb, w3);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4; ++v) std::memcpy(sums[r] + 16 * v, &acc[r][v], sizeof acc[r][v]);
}
#pragma GCC pop_options
// vpdpbusd reads x as unsigned: qx + 128, the same bits as qx ^ 0x80.
void to_unsigned(int8_t* q, int64_t n) {
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(static_cast<uint8_t>(q[i]) ^ 0x80u);
}
#elif defined(__AVX2__)
// AVX2: the panel as two halves of 32 columns (4 registers of 8 int32 sums);
// per group of 4 k and register: w with x's sign (vpsignb), |x| times that
// into 16-bit pair sums (vpmaddubsw, exact: at most 2 · 127²), then pairs of
// those into int32 (vpmaddwd by ones).
constexpr int kInt8Rows = 2;
constexpr int32_t kInt8Shift = 0;
template <int R>
void int8_tile(const uint8_t* qx, int64_t stride, const int8_t* w, int64_t kq, int32_t (*sums)[kPanel]) {
  const __m256i ones = _mm256_set1_epi16(1);
  typedef int32_t Acc __attribute__((vector_size(32)));  // in registers (see the VNNI tile)
  for (int half = 0; half < 2; ++half) {
    Acc acc[R][4] = {};
    for (int64_t g = 0; g < kq; ++g) {
      const int8_t* wg = w + g * kPanel * kInt8Group + half * 128;
      __m256i wv[4];
      for (int v = 0; v < 4; ++v) wv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + 32 * v));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        int32_t four;
        std::memcpy(&four, qx + r * stride + g * kInt8Group, sizeof four);
        const __m256i xb = _mm256_set1_epi32(four);
        const __m256i ax = _mm256_abs_epi8(xb);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          const __m256i pairs = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[v], xb));
          acc[r][v] += (Acc)_mm256_madd_epi16(pairs, ones);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < 4; ++v) std::memcpy(sums[r] + half * 32 + 8 * v, &acc[r][v], sizeof acc[r][v]);
  }
}
void to_unsigned(int8_t*, int64_t) {}
#else
// Plain C++: the same sums, element by element.
constexpr int kInt8Rows = 2;
constexpr int32_t kInt8Shift = 0;
template <int R>
void int8_tile(const uint8_t* qx, int64_t stride, const int8_t* w, int64_t kq, int32_t (*sums)[kPanel]) {
  for (int r = 0; r < R; ++r) {
    const int8_t* x = reinterpret_cast<const int8_t*>(qx) + r * stride;
    for (int64_t c = 0; c < kPanel; ++c) sums[r][c] = 0;
    for (int64_t g = 0; g < kq; ++g) {
      const int8_t* wg = w + g * kPanel * kInt8Group;
      for (int64_t c = 0; c < kPanel; ++c) {
        int32_t s = 0;
        for (int64_t j = 0; j < kInt8Group; ++j)
          s += static_cast<int32_t>(x[g * kInt8Group + j]) * static_cast<int32_t>(wg[c * kInt8Group + j]);
        sums[r][c] += s;
      }
    }
  }
}
void to_unsigned(int8_t*, int64_t) {}
#endif

// Every group of rows against one panel.
void int8_panel(const Int8MatmulParams& p, const int8_t* qx, int64_t stride, const float* x_scale, int64_t panel) {
  const int64_t kq = stride / kInt8Group;
  const int8_t* w = p.w + panel * kq * kPanel * kInt8Group;
  alignas(64) int32_t sums[kInt8Rows][kPanel];
  const auto* ux = reinterpret_cast<const uint8_t*>(qx);
  int64_t m0 = 0;
  for (; m0 + kInt8Rows <= p.rows; m0 += kInt8Rows) {
    int8_tile<kInt8Rows>(ux + m0 * stride, stride, w, kq, sums);
    int8_epilogue(p, sums, kInt8Rows, m0, panel, x_scale, kInt8Shift);
  }
  const int left = static_cast<int>(p.rows - m0);
  switch (left) {
    case 5: if constexpr (kInt8Rows > 5) int8_tile<5>(ux + m0 * stride, stride, w, kq, sums); break;
    case 4: if constexpr (kInt8Rows > 4) int8_tile<4>(ux + m0 * stride, stride, w, kq, sums); break;
    case 3: if constexpr (kInt8Rows > 3) int8_tile<3>(ux + m0 * stride, stride, w, kq, sums); break;
    case 2: if constexpr (kInt8Rows > 2) int8_tile<2>(ux + m0 * stride, stride, w, kq, sums); break;
    case 1: int8_tile<1>(ux + m0 * stride, stride, w, kq, sums); break;
    default: break;
  }
  static_assert(kInt8Rows <= 6, "the switch above covers up to 5 leftover rows");
  if (left > 0) int8_epilogue(p, sums, left, m0, panel, x_scale, kInt8Shift);
}

// ---------------------------------------------------------------- bf16

// x's rows rounded to bf16, k zero-padded to `stride` (even).
void round_rows(const Bf16MatmulParams& p, int64_t stride, bf16* q) {
  for (int64_t m = 0; m < p.rows; ++m) {
    const float* x = p.x + m * p.x_stride;
    bf16* row = q + m * stride;
    for (int64_t k = 0; k < p.in; ++k) row[k] = to_bf16(x[k]);
    std::fill(row + p.in, row + stride, bf16{0});
  }
}

// Widened: per pair of k, a vector of kLanes columns holds both of each
// column's bf16 weights in one 32-bit lane (k even in the low half); the
// even one is that lane shifted up 16 bits, the odd one the lane with its
// low half cleared, both exactly the float the bf16 stands for.
constexpr int kBf16Vecs = 4;
constexpr int kBf16Rows = detail::kAccRegs / kBf16Vecs;
constexpr int64_t kBf16Chunk = kBf16Vecs * kLanes<float>;  // columns per register tile
static_assert(kPanel % kBf16Chunk == 0);

template <int R>
void bf16_tile_widened(const bf16* qx, int64_t stride, const bf16* w, int64_t kh, int64_t c0, float (*out)[kPanel]) {
  using Bits = typename detail::Simd<float>::Bits;
  Vec<float> acc[R][kBf16Vecs];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kBf16Vecs; ++v) acc[r][v] = Vec<float>{};
  for (int64_t g = 0; g < kh; ++g) {
    const bf16* wg = w + (g * kPanel + c0) * kBf16Group;
    Vec<float> even[kBf16Vecs], odd[kBf16Vecs];
    for (int v = 0; v < kBf16Vecs; ++v) {
      Bits u;
      std::memcpy(&u, wg + v * kLanes<float> * kBf16Group, sizeof u);
      even[v] = detail::bit_cast<Vec<float>>(u << 16);
      odd[v] = detail::bit_cast<Vec<float>>(u & 0xffff0000u);
    }
    for (int r = 0; r < R; ++r) {
      const Vec<float> x0 = vec_set1(to_float(qx[r * stride + 2 * g]));
      const Vec<float> x1 = vec_set1(to_float(qx[r * stride + 2 * g + 1]));
      for (int v = 0; v < kBf16Vecs; ++v) acc[r][v] += x0 * even[v] + x1 * odd[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kBf16Vecs; ++v) vec_storeu(out[r] + c0 + v * kLanes<float>, acc[r][v]);
}

#if defined(__AVX512BF16__)
// AVX512-BF16: vdpbf16ps takes a pair of k per float lane, as packed.
template <int R>
void bf16_tile_dpbf16(const bf16* qx, int64_t stride, const bf16* w, int64_t kh, float (*out)[kPanel]) {
  typedef float Acc __attribute__((vector_size(64)));  // in registers (see the VNNI tile)
  Acc acc[R][4] = {};
  for (int64_t g = 0; g < kh; ++g) {
    const bf16* wg = w + g * kPanel * kBf16Group;
    __m512bh wv[4];
    for (int v = 0; v < 4; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(wg + 32 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, qx + r * stride + 2 * g, sizeof pair);
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[r][v] = (Acc)_mm512_dpbf16_ps((__m512)acc[r][v], xb, wv[v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4; ++v) std::memcpy(out[r] + 16 * v, &acc[r][v], sizeof acc[r][v]);
}
#endif

template <int R>
void bf16_tile(const bf16* qx, int64_t stride, const bf16* w, int64_t kh, float (*out)[kPanel]) {
#if defined(__AVX512BF16__)
  if (cpu_features().avx512_bf16) return bf16_tile_dpbf16<R>(qx, stride, w, kh, out);
#endif
  for (int64_t c0 = 0; c0 < kPanel; c0 += kBf16Chunk) bf16_tile_widened<R>(qx, stride, w, kh, c0, out);
}

void bf16_epilogue(const Bf16MatmulParams& p, const float (*out)[kPanel], int rows, int64_t m0, int64_t panel) {
  const int64_t n0 = panel * kPanel, width = std::min(kPanel, p.out - n0);
  for (int r = 0; r < rows; ++r) {
    float* y = p.y + (m0 + r) * p.out + n0;
    for (int64_t c = 0; c < width; ++c) y[c] = out[r][c] + p.bias[n0 + c];
  }
}

void bf16_panel(const Bf16MatmulParams& p, const bf16* qx, int64_t stride, int64_t panel) {
  const int64_t kh = stride / kBf16Group;
  const bf16* w = p.w + panel * kh * kPanel * kBf16Group;
  alignas(64) float out[kBf16Rows][kPanel];
  int64_t m0 = 0;
  for (; m0 + kBf16Rows <= p.rows; m0 += kBf16Rows) {
    bf16_tile<kBf16Rows>(qx + m0 * stride, stride, w, kh, out);
    bf16_epilogue(p, out, kBf16Rows, m0, panel);
  }
  const int left = static_cast<int>(p.rows - m0);
  switch (left) {
    case 5: if constexpr (kBf16Rows > 5) bf16_tile<5>(qx + m0 * stride, stride, w, kh, out); break;
    case 4: if constexpr (kBf16Rows > 4) bf16_tile<4>(qx + m0 * stride, stride, w, kh, out); break;
    case 3: if constexpr (kBf16Rows > 3) bf16_tile<3>(qx + m0 * stride, stride, w, kh, out); break;
    case 2: bf16_tile<2>(qx + m0 * stride, stride, w, kh, out); break;
    case 1: bf16_tile<1>(qx + m0 * stride, stride, w, kh, out); break;
    default: break;
  }
  static_assert(kBf16Rows <= 6, "the switch above covers up to 5 leftover rows");
  if (left > 0) bf16_epilogue(p, out, left, m0, panel);
}

}  // namespace

void int8_matmul(const Int8MatmulParams& p) {
  if (p.rows <= 0 || p.out <= 0) return;
  // pass 1: x's rows to int8 (the calling thread's scratch; the panels'
  // threads only read it).
  const int64_t stride = groups(p.in, kInt8Group) * kInt8Group;
  thread_local Scratch<int8_t> qx_scratch;
  thread_local Scratch<float> scale_scratch;
  int8_t* qx = qx_scratch.get(p.rows * stride);
  float* x_scale = scale_scratch.get(p.rows);
  quantize_rows(p, stride, qx, x_scale);
  to_unsigned(qx, p.rows * stride);
  // pass 2: panels of 64 columns, spread over threads; every group of rows
  // in turn against a panel, so its weights come from memory once.
  const int8_t* q = qx;
  const float* s = x_scale;
  const int64_t n = panels(p.out);
  detail::parallel_for(n, worth_threads(p.rows, p.in, p.out),
                       [&](int64_t panel) { int8_panel(p, q, stride, s, panel); });
}

void bf16_matmul(const Bf16MatmulParams& p) {
  if (p.rows <= 0 || p.out <= 0) return;
  const int64_t stride = groups(p.in, kBf16Group) * kBf16Group;
  thread_local Scratch<bf16> qx_scratch;
  bf16* qx = qx_scratch.get(p.rows * stride);
  round_rows(p, stride, qx);
  const bf16* q = qx;
  const int64_t n = panels(p.out);
  detail::parallel_for(n, worth_threads(p.rows, p.in, p.out), [&](int64_t panel) { bf16_panel(p, q, stride, panel); });
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
