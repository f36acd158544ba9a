// bfloat16 as the kernels see it: 16 bits, the upper half of an IEEE float
// (the layout of c10::BFloat16), converted with round-to-nearest-even as
// LibTorch does. Plain C++; `static inline` keeps each instruction-set copy
// of the kernels self-contained.
#pragma once

#include <cstdint>
#include <cstring>

namespace nmt::ops {

struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2);

static inline float to_float(bf16 x) {
  const uint32_t u = static_cast<uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

static inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{0x7fc0};  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

// Loads and stores in a kernel's compute type T (float or double) whatever
// the storage type (T itself or bf16).
template <typename T>
static inline T load_as(T x) {
  return x;
}
template <typename T>
static inline T load_as(bf16 x) {
  return static_cast<T>(to_float(x));
}
template <typename T>
static inline void store_as(T* p, T x) {
  *p = x;
}
template <typename T>
static inline void store_as(bf16* p, T x) {
  *p = to_bf16(static_cast<float>(x));
}

}  // namespace nmt::ops
