#include "util/cpu_features.h"

#include <cstdlib>
#include <string>

#include "nmt_kernel_isas.h"
#include "util/errors.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace nmt {

namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  // Leaf 0: the vendor string in ebx, edx, ecx ("Genu" "ineI" "ntel").
  if (__get_cpuid(0, &a, &b, &c, &d)) f.intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool has_fma = c & (1u << 12);
  if (!osxsave) return f;
  // Which register states the OS saves: SSE|AVX (bits 1,2), opmask|ZMM (5,6,7), tiles (17,18).
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_avx = (xcr0_lo & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0_lo & 0xe0) == 0xe0;
  const bool os_amx = (xcr0_lo & 0x60000) == 0x60000;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = os_avx && (b & (1u << 5));
  f.fma = os_avx && has_fma;
  f.avx512f = os_avx512 && (b & (1u << 16));
  f.avx512dq = os_avx512 && (b & (1u << 17));
  f.avx512bw = os_avx512 && (b & (1u << 30));
  f.avx512vl = os_avx512 && (b & (1u << 31));
  f.avx512_vnni = os_avx512 && (c & (1u << 11));
  f.amx_bf16 = os_amx && (d & (1u << 22));
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f.avx512_bf16 = os_avx512 && (a1 & (1u << 5));
#endif
  return f;
}

CpuIsa best_isa(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx2 && f.fma)
    return f.avx512_vnni ? CpuIsa::kAvx512Vnni : CpuIsa::kAvx512;
  if (f.avx2 && f.fma) return CpuIsa::kAvx2;
  return CpuIsa::kGeneric;
}

CpuIsa choose_isa() {
  const CpuIsa best = best_isa(cpu_features());
  const char* env = std::getenv("NMT_CPU_ISA");
  if (!env || !*env) return best;
  const std::string want(env);
  for (CpuIsa isa : kAllCpuIsas) {
    if (want != isa_name(isa)) continue;
    if (isa > best)
      throw InputError("NMT_CPU_ISA: " + want + " is not supported by this CPU (best: " +
                       isa_name(best) + ")");
    if (!kernels_built(isa))
      throw InputError("NMT_CPU_ISA: " + want + ": this nmt has the kernels for " + NMT_KERNEL_ISA_NAMES +
                       " only (NMT_KERNEL_ISAS=host, scripts/setup.sh --demo); scripts/setup.sh builds every copy");
    return isa;
  }
  throw InputError("NMT_CPU_ISA: '" + want + "' is not one of: generic | avx2 | avx512 | avx512vnni");
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

CpuIsa best_cpu_isa() { return best_isa(cpu_features()); }

bool kernels_built(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric: return NMT_KERNELS_GENERIC;
    case CpuIsa::kAvx2: return NMT_KERNELS_AVX2;
    case CpuIsa::kAvx512:
    case CpuIsa::kAvx512Vnni: return NMT_KERNELS_AVX512;
  }
  return false;
}

namespace {

// The chosen instruction set, lowered to a copy this build has.
CpuIsa built_isa() {
  const CpuIsa chosen = choose_isa();
  for (int i = static_cast<int>(chosen); i >= 0; --i)
    if (kernels_built(static_cast<CpuIsa>(i))) return static_cast<CpuIsa>(i);
  throw InputError(std::string("this nmt was built with the CPU kernels for ") + NMT_KERNEL_ISA_NAMES +
                   " only (NMT_KERNEL_ISAS=host, on another machine), which this CPU (" + isa_name(chosen) +
                   ") cannot run: build it here (scripts/setup.sh)");
}

}  // namespace

CpuIsa kernel_isa() {
  static const CpuIsa isa = built_isa();
  return isa;
}

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric: return "generic";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Vnni: return "avx512vnni";
  }
  return "?";
}

bool cpu_has_fast_bf16() {
  const CpuFeatures& f = cpu_features();
  // The bf16 instructions are in the AVX-512 copy of the kernels only: with
  // a lower copy in use (NMT_CPU_ISA=avx2), bf16 is widened to float32 and
  // slower than float32 itself.
  return (f.avx512_bf16 || f.amx_bf16) && kernel_isa() >= CpuIsa::kAvx512;
}

}  // namespace nmt
