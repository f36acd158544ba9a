// What this CPU can do, asked at run time (cpuid + xgetbv), so one binary runs
// everywhere: kernels are compiled for several instruction sets and the best
// one the CPU supports is used. NMT_CPU_ISA=generic|avx2|avx512|avx512vnni
// picks a lower one (tests use it to run the fallbacks).
#pragma once

namespace nmt {

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false;  // vdpbf16ps: bf16 dot products
  bool avx512_vnni = false;  // vpdpbusd: int8 dot products into int32
  bool amx_bf16 = false;     // tile matrix multiply (oneDNN uses it for bf16 matmuls)
  bool intel = false;        // vendor GenuineIntel (Intel MKL's own CPUs: ops/linear/cpu/float_gemm.h)
};

const CpuFeatures& cpu_features();

// Instruction sets the CPU kernels are compiled for, lowest first.
// kAvx512Vnni runs the avx512 copies too; only the int8 matrix multiply
// (ops/linear/cpu/int8_matmul_cpu.h) has a kernel of its own for it, so
// NMT_CPU_ISA=avx512 is an AVX-512 CPU without VNNI.
enum class CpuIsa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3 };
inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Vnni};

// The best supported one, lowered by NMT_CPU_ISA and to the copies this
// build has (NMT_KERNEL_ISAS). An unknown value, or one the CPU or the build
// lacks, is an InputError naming the variable.
CpuIsa kernel_isa();
// Whether this build compiled the kernels for `isa` (kAvx512Vnni: the avx512 copy).
bool kernels_built(CpuIsa isa);
// The best this CPU supports, whatever NMT_CPU_ISA says.
CpuIsa best_cpu_isa();
const char* isa_name(CpuIsa isa);

// bf16 matrix multiplies that are faster than float32: the CPU has
// AVX512-BF16 (or AMX) and the kernels in use are the AVX-512 copy (not
// lowered by NMT_CPU_ISA).
bool cpu_has_fast_bf16();

}  // namespace nmt
