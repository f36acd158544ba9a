// The instruction sets the CPU kernels are compiled for. CMakeLists.txt
// builds every kernel source once per entry, with NMT_KERNEL_ISA set to the
// entry's name, so each copy lives in its own namespace (cpu::generic::...,
// cpu::avx2::..., cpu::avx512::...). NMT_CPU_DISPATCH calls the copy for
// the instruction set chosen at run time (util/cpu_features.h).
#pragma once

#include "util/cpu_features.h"

#if defined(__x86_64__)
#define NMT_FOR_EACH_KERNEL_ISA(M) M(generic) M(avx2) M(avx512)
#define NMT_CPU_DISPATCH(fn, ...)                                     \
  switch (::nmt::kernel_isa()) {                                      \
    case ::nmt::CpuIsa::kAvx512Vnni:                                  \
    case ::nmt::CpuIsa::kAvx512: return avx512::fn(__VA_ARGS__);      \
    case ::nmt::CpuIsa::kAvx2: return avx2::fn(__VA_ARGS__);          \
    case ::nmt::CpuIsa::kGeneric: break;                              \
  }                                                                   \
  return generic::fn(__VA_ARGS__)
#else
#define NMT_FOR_EACH_KERNEL_ISA(M) M(generic)
#define NMT_CPU_DISPATCH(fn, ...) return generic::fn(__VA_ARGS__)
#endif
