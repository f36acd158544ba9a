// The instruction sets the CPU kernels are compiled for. CMakeLists.txt
// builds every kernel source once per entry, with NMT_KERNEL_ISA set to the
// entry's name, so each copy lives in its own namespace (cpu::generic::...,
// cpu::avx2::..., cpu::avx512::...). NMT_CPU_DISPATCH calls the copy for
// the instruction set chosen at run time (util/cpu_features.h); a build
// may hold only some of the copies (NMT_KERNEL_ISAS=host).
#pragma once

#include "nmt_kernel_isas.h"  // which copies this build made (CMakeLists.txt: NMT_KERNEL_ISAS)
#include "util/cpu_features.h"

#if defined(__x86_64__)
#if NMT_KERNELS_GENERIC
#define NMT_KERNEL_ISA_GENERIC_(M) M(generic)
#else
#define NMT_KERNEL_ISA_GENERIC_(M)
#endif
#if NMT_KERNELS_AVX2
#define NMT_KERNEL_ISA_AVX2_(M) M(avx2)
#define NMT_KERNEL_CASE_AVX2_(fn, ...) \
  case ::nmt::CpuIsa::kAvx2: return avx2::fn(__VA_ARGS__);
#else
#define NMT_KERNEL_ISA_AVX2_(M)
#define NMT_KERNEL_CASE_AVX2_(fn, ...)
#endif
#if NMT_KERNELS_AVX512
#define NMT_KERNEL_ISA_AVX512_(M) M(avx512)
#define NMT_KERNEL_CASE_AVX512_(fn, ...)     \
  case ::nmt::CpuIsa::kAvx512Vnni:           \
  case ::nmt::CpuIsa::kAvx512: return avx512::fn(__VA_ARGS__);
#else
#define NMT_KERNEL_ISA_AVX512_(M)
#define NMT_KERNEL_CASE_AVX512_(fn, ...)
#endif
#define NMT_FOR_EACH_KERNEL_ISA(M) NMT_KERNEL_ISA_GENERIC_(M) NMT_KERNEL_ISA_AVX2_(M) NMT_KERNEL_ISA_AVX512_(M)
// kernel_isa() names a copy this build has (it clamps to them), so the
// lowest copy is reached only for the lowest instruction set.
#define NMT_CPU_DISPATCH(fn, ...)                   \
  switch (::nmt::kernel_isa()) {                    \
    NMT_KERNEL_CASE_AVX512_(fn, __VA_ARGS__)        \
    NMT_KERNEL_CASE_AVX2_(fn, __VA_ARGS__)          \
    default: break;                                 \
  }                                                 \
  return NMT_LOWEST_KERNEL_ISA::fn(__VA_ARGS__)
#else
#define NMT_FOR_EACH_KERNEL_ISA(M) M(generic)
#define NMT_CPU_DISPATCH(fn, ...) return generic::fn(__VA_ARGS__)
#endif
