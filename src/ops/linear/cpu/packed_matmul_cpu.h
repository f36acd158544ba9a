// y = x · w + bias with w stored in 8 or 16 bits, for decoding on the CPU
// (ops/linear/packed_linear.h packs the weights and picks the kernel).
//
// int8: w is quantized per output column (symmetric: w ≈ q · w_scale[n],
// q in [-127, 127]), x per row at run time the same way; the products are
// summed exactly in int32 and the sum is scaled back to float once:
//   y[m][n] = (Σ_k qx[m][k] · qw[k][n]) · x_scale[m] · w_scale[n] + bias[n].
// Kernels: AVX-512 VNNI (vpdpbusd: 4 byte products per int32 lane and
// instruction), AVX2 (vpmaddubsw + vpmaddwd, the same exact sum in three
// instructions), and plain C++. vpdpbusd multiplies unsigned by signed bytes,
// so that kernel feeds qx + 128 and takes 128 · Σ_k qw[k][n] (w_sum) back;
// vpmaddubsw would saturate on such sums, so the AVX2 kernel moves x's sign
// onto w instead (|qx| · sign(qx)·qw, each pair at most 2 · 127² < 2^15).
//
// bf16: w rounded to bf16, x rounded to bf16 per use, products summed in
// float32: vdpbf16ps where the CPU has AVX512-BF16, else each bf16 pair
// widened (exactly) to float and multiplied in float.
//
// Both layouts cut w's columns into panels of kPanel and keep, per panel,
// the few k of a column that one instruction reads together side by side:
//   int8: [panels][ceil(K/4)][kPanel][4]   bf16: [panels][ceil(K/2)][kPanel][2]
// zero-padded in k and n, so a register tile reads whole vectors.
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/cpu_isa.h"
#include "ops/linear/cpu/panel.h"

namespace nmt::ops::cpu {

inline constexpr int64_t kInt8Group = 4;    // k per int32 lane (vpdpbusd)
inline constexpr int64_t kBf16Group = 2;    // k per float lane (vdpbf16ps)

struct Int8MatmulParams {
  const float* x;         // x: [M, K], row stride x_stride
  const int8_t* w;        // w: packed as above
  const float* w_scale;   // w_scale: [panels · kPanel] (0 past N)
  const int32_t* w_sum;   // w_sum: [panels · kPanel], Σ_k qw[k][n]
  const float* bias;      // bias: [panels · kPanel], zeros where the layer has none
  float* y;               // y: [M, N] (written)
  int64_t rows, in, out, x_stride;  // M, K, N
};

struct Bf16MatmulParams {
  const float* x;     // x: [M, K], row stride x_stride
  const bf16* w;      // w: packed as above
  const float* bias;  // bias: [panels · kPanel], zeros where the layer has none
  float* y;           // y: [M, N] (written)
  int64_t rows, in, out, x_stride;
};

// Each ISA's copy: int8_matmul (plain C++ in generic, vpmaddubsw in avx2,
// vpdpbusd in avx512), bf16_matmul (vdpbf16ps in avx512 where the CPU has
// AVX512-BF16, widened to float otherwise).
#define NMT_DECLARE_PACKED_MATMUL_KERNELS(isa)    \
  namespace isa {                                 \
  void int8_matmul(const Int8MatmulParams& p);    \
  void bf16_matmul(const Bf16MatmulParams& p);    \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_PACKED_MATMUL_KERNELS)
#undef NMT_DECLARE_PACKED_MATMUL_KERNELS

// The int8 kernel of the chosen ISA. An AVX-512 CPU without VNNI runs the
// AVX2 kernel: without vpdpbusd, 512-bit vpmaddubsw gains little and AVX-512
// has no vpsignb.
// (A host build of an AVX-512 CPU without VNNI has the AVX2 copy too.)
inline void int8_matmul(const Int8MatmulParams& p) {
#if defined(__x86_64__)
  switch (::nmt::kernel_isa()) {
#if NMT_KERNELS_AVX512
    case ::nmt::CpuIsa::kAvx512Vnni: return avx512::int8_matmul(p);
#endif
#if NMT_KERNELS_AVX2
    case ::nmt::CpuIsa::kAvx512:
    case ::nmt::CpuIsa::kAvx2: return avx2::int8_matmul(p);
#endif
    default: break;
  }
#endif
  NMT_LOWEST_KERNEL_ISA::int8_matmul(p);
}

inline void bf16_matmul(const Bf16MatmulParams& p) { NMT_CPU_DISPATCH(bf16_matmul, p); }

}  // namespace nmt::ops::cpu
