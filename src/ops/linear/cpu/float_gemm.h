// The float32 products of a CPU training step (dense() and the fused
// cross-entropy), and the library that runs them: oneDNN's sgemm
// (onednn_gemm.h), or Intel MKL's where it is in the process (inside
// PyPI's LibTorch, which hides its oneDNN, on any CPU: there it is the only
// one) or its runtime library is installed (Debian: libmkl-rt, in non-free)
// and the CPU is Intel's. The bf16 products' library is chosen below.
//
// Why a second library: in a training step the products' operands come from
// memory other ops wrote moments before, not from the cache a benchmark
// leaves them in. On a Xeon with AMX (2 cores), oneDNN's sgemm ran a step's
// products at 72% of the speed their shapes reach alone, MKL's at 76-81%,
// and MKL ran the gradients' shapes (Aᵀ · B, A · Bᵀ) 13-22% faster even
// alone; PyTorch's products are MKL's. A step's products took 4.5% less time
// on MKL, 10% less held to AVX2 (docs/bench/roofline.md).
//
// Where MKL is the only one (PyPI's LibTorch) and the CPU is not Intel's,
// nmt's own sgemm runs them: on an AMD EPYC (Zen 4, 2 threads, configs/
// real.yaml, LibTorch 2.11) a step took 516-523 ms with it and 512-626 ms
// (median 596) with MKL's, whose products ran at 146-182 GFLOP/s to nmt's
// 176-178; LibTorch's own mm (MKL again) 574 ms.
//
// Why by vendor and not by a measurement: the library sets the order in
// which a product sums, so a run resumed from a checkpoint must multiply on
// the library it started on, or its losses part from the uninterrupted
// run's; a timing taken at start on a busy machine could choose the other
// one. MKL is Intel's library and known to take slower code paths on other
// vendors' CPUs, so `auto` takes MKL where it is installed on an Intel CPU,
// oneDNN's everywhere else (bench/bench_gemm_libraries.sh compares them
// shape by shape). NMT_CPU_GEMM=auto | onednn | mkl | nmt chooses by hand.
//
// Why nmt's own sgemm (sgemm_cpu.h) for some products: held to AVX2 (an
// AVX2-only CPU, or NMT_CPU_ISA=avx2), oneDNN runs the weight gradients,
// `Aᵀ · B` summed over a batch's rows, at 45-80% of the speed it runs the
// same shapes as `A · B`. Where oneDNN is chosen automatically and the
// kernels are AVX2's, those products run on nmt's where it measured faster
// (is_long_weight_gradient says which shapes); the rule reads only the
// instruction set and the shape, so a resumed run multiplies as it started.
// NMT_CPU_GEMM=onednn keeps every product on oneDNN; NMT_CPU_GEMM=nmt puts
// every one on nmt's (for comparison: level with oneDNN's or slower on the
// other shapes, slower at AVX-512).
//
// MKL is looked up at run time (nmt links nothing more) and runs on
// OpenMP's threads (its GNU threading layer), the pool every other op of a
// step runs on, like oneDNN's and nmt's (util/thread_env.h says why that
// matters). Plain C++, no LibTorch.
#pragma once

#include <string>

#include "ops/bf16.h"
#include "ops/linear/cpu/gemm_params.h"

namespace nmt::ops::cpu {

enum class FloatGemm { kOnednn, kMkl, kNmt };

struct FloatGemmChoice {
  FloatGemm library = FloatGemm::kOnednn;
  bool by_hand = false;                  // named by NMT_CPU_GEMM
  bool weight_gradients_on_nmt = false;  // some Aᵀ · B on nmt's (see above)
};

// The rule: want is NMT_CPU_GEMM ("" for auto). Throws InputError (exit 2)
// for an unknown name, or for a library asked for by name that is not in
// this process. auto: MKL where it is present and the CPU is Intel's,
// oneDNN where it is present otherwise (the weight gradients on nmt's where
// the kernels are AVX2's: avx2_kernels), nmt's where MKL is alone on another
// vendor's CPU.
FloatGemmChoice choose_float_gemm(const std::string& want, bool onednn, bool mkl, bool intel_cpu,
                                  bool avx2_kernels);
// Whether a product goes to nmt's sgemm under weight_gradients_on_nmt.
bool is_long_weight_gradient(const GemmParams<float>& p);

// Whether oneDNN's or MKL's sgemm is here: the float32 products of a step
// take this route only then, else LibTorch's (decides nothing).
bool float_gemm_available();
// The library in use, decided on first call from NMT_CPU_GEMM; throws
// InputError for a bad one (a training run asks at its start, so that a
// bf16 run, with no float32 products, rejects a bad setting too).
const FloatGemmChoice& float_gemm_choice();
// "oneDNN's sgemm", "MKL 2020.0.4's sgemm" or "nmt's sgemm", with why.
std::string float_gemm_description();
// C = alpha op(A) op(B) + beta C on the library in use.
void float_gemm(const GemmParams<float>& p);
// On one library, whichever is in use (tests and benchmarks).
void float_gemm_on(FloatGemm library, const GemmParams<float>& p);

// ---- bf16 products ----------------------------------------------------------
// A bf16 step's products (bf16 operands, float32 output) run on oneDNN's
// gemm where LibTorch exports it (Debian's), the library LibTorch's own bf16
// products run on. MKL's (cblas_gemm_bf16bf16f32) only by hand,
// NMT_CPU_GEMM=mkl: on an AMD EPYC (Zen 4, AVX512-BF16) MKL 2024.2's ran at
// its float32 speed, 160-187 GFLOP/s on 2 cores against the 415-438 of
// oneDNN's bf16 kernels inside the same LibTorch; on Intel's CPUs it is
// unmeasured. Without either (PyPI's LibTorch, whose oneDNN is hidden, on
// any CPU), bf16 products go through LibTorch's mm.
enum class Bf16Gemm { kNone, kOnednn, kMkl };
Bf16Gemm choose_bf16_gemm(const std::string& want, bool onednn, bool mkl);
// The library in use (NMT_CPU_GEMM, read once; float_gemm_choice() rejects a
// bad value first).
Bf16Gemm bf16_gemm_library();
bool bf16_gemm_available();
// "oneDNN's gemm" or "MKL 2024.2's bf16 gemm (NMT_CPU_GEMM=mkl)".
std::string bf16_gemm_description();
// C = alpha op(A) op(B) + beta C with bf16 A and B on the library in use.
void bf16_gemm(const GemmParams<bf16>& p);

// ---- MKL, looked up on first use ---------------------------------------------
// In the process (LibTorch with MKL inside it) or Intel's libmkl_rt.
bool mkl_sgemm_available();
bool mkl_bf16_gemm_available();
// "2024.2" or "" when absent.
std::string mkl_version();
// "in LibTorch", "libmkl_rt", or "" when absent.
std::string mkl_source();
// Throw std::runtime_error when MKL (or its bf16 gemm) is absent.
void mkl_sgemm(const GemmParams<float>& p);
void mkl_bf16_gemm(const GemmParams<bf16>& p);

}  // namespace nmt::ops::cpu
