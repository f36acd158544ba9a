// SIMD helpers shared by the CPU kernels: a portable vector type
// (GCC/Clang vector extensions, so one code path compiles to AVX-512, AVX2
// or SSE depending on -march), a range-reduced polynomial exp2, and a
// 64-byte aligned scratch buffer. No LibTorch, no intrinsics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

#include "ops/bf16.h"

#ifndef NMT_KERNEL_ISA
#error "kernel sources are compiled once per instruction set with NMT_KERNEL_ISA defined (see CMakeLists.txt)"
#endif

// Inside the instruction set's own namespace: the same inline helpers are
// compiled with different flags per ISA and must not be merged by the linker.
namespace nmt::ops::cpu::NMT_KERNEL_ISA::detail {

// Vector width follows the instruction set we are compiled for. kAccRegs is
// how many vector registers a micro-kernel may keep as accumulators while
// leaving room for the loaded operands (32 registers with AVX-512, 16 else).
#if defined(__AVX512F__)
inline constexpr int kVecBytes = 64;
inline constexpr int kAccRegs = 24;
#elif defined(__AVX__)
inline constexpr int kVecBytes = 32;
inline constexpr int kAccRegs = 12;
#else
inline constexpr int kVecBytes = 16;
inline constexpr int kAccRegs = 12;
#endif

template <typename T>
struct Simd;

// Polynomial coefficients below approximate 2^f on [-0.5, 0.5]; they are
// Chebyshev interpolants converted to monomial form (max relative error
// 2.5e-9 for the degree-6 float version, 4.3e-18 for degree-11 double), so
// the result is within ~1-2 ulp after rounding.
template <>
struct Simd<float> {
  typedef float Vec __attribute__((vector_size(kVecBytes)));
  typedef int32_t Mask __attribute__((vector_size(kVecBytes)));
  typedef uint32_t Bits __attribute__((vector_size(kVecBytes)));
  static constexpr int kLanes = kVecBytes / sizeof(float);
  // Adding 1.5 * 2^23 rounds to an integer n and leaves n in the low
  // mantissa bits, so (bits + bias) << mantissa is 2^n with no conversion.
  static constexpr float kRoundMagic = 12582912.0f;
  static constexpr uint32_t kExpBias = 127;
  static constexpr int kMantissaBits = 23;
  // Clamping at -127 makes the exponent field 0 (result exactly 0, also
  // for -inf inputs) instead of wrapping around.
  static constexpr float kMinArg = -127.0f;
  static constexpr float kMaxArg = 127.0f;
  static constexpr int kPolyDegree = 6;
  static constexpr float kPoly[kPolyDegree + 1] = {
      1.0f,
      6.931472067028325960e-01f,
      2.402265092228875808e-01f,
      5.550327226670301710e-02f,
      9.618056678524637131e-03f,
      1.340042817761593862e-03f,
      1.546144469856933819e-04f};
};

template <>
struct Simd<double> {
  typedef double Vec __attribute__((vector_size(kVecBytes)));
  typedef int64_t Mask __attribute__((vector_size(kVecBytes)));
  typedef uint64_t Bits __attribute__((vector_size(kVecBytes)));
  static constexpr int kLanes = kVecBytes / sizeof(double);
  static constexpr double kRoundMagic = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr uint64_t kExpBias = 1023;
  static constexpr int kMantissaBits = 52;
  static constexpr double kMinArg = -1023.0;
  static constexpr double kMaxArg = 1023.0;
  static constexpr int kPolyDegree = 11;
  static constexpr double kPoly[kPolyDegree + 1] = {
      9.999999999999999968558e-01, 6.931471805599453092119e-01,
      2.402265069591016003158e-01, 5.550410866482163352081e-02,
      9.618129107587148869840e-03, 1.333355814640424641051e-03,
      1.540353046382442741911e-04, 1.525273384419583773430e-05,
      1.321543249489089197046e-06, 1.017805583470079725368e-07,
      7.074200420606509390699e-09, 4.456022374666841290979e-10};
};

template <typename T>
using Vec = typename Simd<T>::Vec;

template <typename T>
inline constexpr int kLanes = Simd<T>::kLanes;

// x - 0 is x for every x (-0 included), so this compiles to a broadcast
// alone; Vec<T>{} + x needed an add first (-0 + 0 is +0).
template <typename T>
inline Vec<T> vec_set1(T x) {
  return x - Vec<T>{};
}

// Pointers given to these two must be aligned to the vector size (all our
// packed tiles are).
template <typename T>
inline Vec<T> vec_load(const T* ptr) {
  return *reinterpret_cast<const Vec<T>*>(ptr);
}

template <typename T>
inline void vec_store(T* ptr, Vec<T> x) {
  *reinterpret_cast<Vec<T>*>(ptr) = x;
}

// Element type of a vector type (lets the functions below deduce it).
template <typename V>
using ElementOf = std::decay_t<decltype(std::declval<V>()[0])>;

template <typename V>
inline V vec_max(V a, V b) {
  return a > b ? a : b;
}

// Reinterprets the bits of a vector (std::bit_cast is C++20).
template <typename To, typename From>
inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// 2^x for every lane. Inputs at or below kMinArg (including -inf) give 0,
// so masked scores can be fed straight in.
template <typename V>
inline V vec_exp2(V x) {
  using T = ElementOf<V>;
  using S = Simd<T>;
  using Bits = typename S::Bits;
  x = x < S::kMinArg ? vec_set1<T>(S::kMinArg) : x;
  x = x > S::kMaxArg ? vec_set1<T>(S::kMaxArg) : x;
  const V shifted = x + S::kRoundMagic;
  const V n = shifted - S::kRoundMagic;
  const V f = x - n;  // in [-0.5, 0.5]
  V poly = vec_set1<T>(S::kPoly[S::kPolyDegree]);
#pragma GCC unroll 16
  for (int i = S::kPolyDegree - 1; i >= 0; --i) poly = poly * f + S::kPoly[i];
  const Bits pow2n = (bit_cast<Bits>(shifted) + S::kExpBias) << S::kMantissaBits;
  return poly * bit_cast<V>(pow2n);
}

// Unaligned loads and stores, from and to float, double or bf16 storage
// (bf16 widens exactly; narrowing rounds to nearest even, NaN not preserved).
template <typename T>
inline Vec<T> vec_loadu(const T* ptr) {
  Vec<T> v;
  std::memcpy(&v, ptr, sizeof v);
  return v;
}

inline Vec<float> vec_loadu(const bf16* ptr) {
  typedef uint16_t Half __attribute__((vector_size(kVecBytes / 2)));
  Half h;
  std::memcpy(&h, ptr, sizeof h);
  const typename Simd<float>::Bits wide = __builtin_convertvector(h, typename Simd<float>::Bits) << 16;
  return bit_cast<Vec<float>>(wide);
}

template <typename T>
inline void vec_storeu(T* ptr, Vec<T> v) {
  std::memcpy(ptr, &v, sizeof v);
}

inline void vec_storeu(bf16* ptr, Vec<float> v) {
  typedef uint16_t Half __attribute__((vector_size(kVecBytes / 2)));
  using Bits = typename Simd<float>::Bits;
  const Bits u = bit_cast<Bits>(v);
  const Bits rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const Half h = __builtin_convertvector(rounded, Half);
  std::memcpy(ptr, &h, sizeof h);
}

// v, as a value the compiler must have rounded: a product passed through
// here is never fused with a later addition into an FMA. GCC contracts
// a * b + c across statements, and may decide differently in two copies of
// one loop; where two code paths must give the same bits, the product goes
// through here.
template <typename V>
inline V vec_rounded(V v) {
  asm("" : "+v"(v));
  return v;
}

// Horizontal reductions.
template <typename V>
inline ElementOf<V> vec_sum(V v) {
  ElementOf<V> s = 0;
  for (int i = 0; i < static_cast<int>(sizeof(V) / sizeof(s)); ++i) s += v[i];
  return s;
}

// The same sum as a tree of halves (a few shuffles and adds instead of a
// chain of one add per lane); a different order, so different low bits:
// used where that order is the kernel's own (the attention row kernel).
template <typename V>
inline ElementOf<V> vec_sum_tree(V v) {
  using T = ElementOf<V>;
  if constexpr (sizeof(V) == sizeof(T)) {
    return v[0];
  } else {
    typedef T Half __attribute__((vector_size(sizeof(V) / 2)));
    Half lo, hi;
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    return vec_sum_tree(lo + hi);
  }
}

// Whether any lane of a comparison's mask is set: the halves OR-ed down
// to one 64-bit word (a lane-by-lane test compiled to an extract and a
// branch per lane, a fifth of beam search's top-k scan).
template <typename M>
inline bool vec_any(M m) {
  typedef uint64_t Words16 __attribute__((vector_size(16)));
  typedef uint64_t Words32 __attribute__((vector_size(32)));
  static_assert(sizeof(M) == 16 || sizeof(M) == 32 || sizeof(M) == 64, "a 128-, 256- or 512-bit mask");
  Words16 w16;
  if constexpr (sizeof(M) == 16) {
    std::memcpy(&w16, &m, sizeof w16);
  } else {
    Words32 w32;
    if constexpr (sizeof(M) == 32) {
      std::memcpy(&w32, &m, sizeof w32);
    } else {
      Words32 hi;
      std::memcpy(&w32, &m, sizeof w32);
      std::memcpy(&hi, reinterpret_cast<const char*>(&m) + sizeof w32, sizeof hi);
      w32 |= hi;
    }
    Words16 hi;
    std::memcpy(&w16, &w32, sizeof w16);
    std::memcpy(&hi, reinterpret_cast<const char*>(&w32) + sizeof w16, sizeof hi);
    w16 |= hi;
  }
  return (w16[0] | w16[1]) != 0;
}

template <typename V>
inline ElementOf<V> vec_hmax(V v) {
  ElementOf<V> m = v[0];
  for (int i = 1; i < static_cast<int>(sizeof(V) / sizeof(m)); ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// Transposes an L x L block held as L vectors (v[r][c] -> v[c][r]) in
// log2(L) rounds of interleaving: each round pairs vector k with vector
// k + L/2 and writes their low-half and high-half interleaves as vectors 2k
// and 2k + 1 (two-source lane shuffles, one instruction each on AVX-512).
template <typename T>
inline void vec_transpose(Vec<T> (&v)[kLanes<T>]) {
  constexpr int L = kLanes<T>;
  using Mask = typename Simd<T>::Mask;
  Mask lo{}, hi{};
  for (int i = 0; i < L / 2; ++i) {
    lo[2 * i] = i, lo[2 * i + 1] = L + i;
    hi[2 * i] = L / 2 + i, hi[2 * i + 1] = L + L / 2 + i;
  }
#pragma GCC unroll 4
  for (int round = 1; round < L; round *= 2) {
    Vec<T> out[L] = {};
#pragma GCC unroll 8
    for (int k = 0; k < L / 2; ++k) {
      out[2 * k] = __builtin_shuffle(v[k], v[k + L / 2], lo);
      out[2 * k + 1] = __builtin_shuffle(v[k], v[k + L / 2], hi);
    }
#pragma GCC unroll 16
    for (int k = 0; k < L; ++k) v[k] = out[k];
  }
}

inline constexpr int64_t round_up(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

// Uninitialized, 64-byte aligned scratch memory (per-thread tiles).
template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t count) { reset(count); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  void reset(int64_t count) {
    std::free(data_);
    data_ = nullptr;
    if (count <= 0) return;
    const auto bytes = static_cast<size_t>(
        round_up(count * static_cast<int64_t>(sizeof(T)), 64));
    data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](int64_t i) { return data_[i]; }

 private:
  T* data_ = nullptr;
};

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA::detail
