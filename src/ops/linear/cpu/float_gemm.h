// The float32 products of a CPU training step (dense() and the fused
// cross-entropy), and the library that runs them: oneDNN's sgemm
// (onednn_gemm.h); Intel MKL's where it is in the process (inside PyPI's
// LibTorch, which hides its oneDNN) or installed (Debian: libmkl-rt, in
// non-free) and the CPU is Intel's, as it runs a step's products faster
// there; nmt's own sgemm (sgemm_cpu.h) where MKL is alone on another
// vendor's CPU, and for the long weight gradients where the kernels are
// AVX2's, which oneDNN runs slowly there (is_long_weight_gradient). The
// bf16 products' library is chosen below.
//
// By vendor and instruction set, never by a timing at start: the library
// sets the order in which a product sums, so a resumed run must multiply on
// the library it started on. NMT_CPU_GEMM=auto | onednn | mkl | nmt chooses
// by hand. The measurements behind each rule: docs/bench/cpu_gemm.md.
//
// MKL is looked up at run time (nmt links nothing more) and runs on
// OpenMP's threads (its GNU threading layer), the pool every other op of a
// step runs on (util/thread_env.h says why that matters). Plain C++, no
// LibTorch.
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
// NMT_CPU_GEMM=mkl: it ran at its float32 speed on an AMD EPYC
// (docs/bench/cpu_gemm.md). Without either (PyPI's LibTorch, whose oneDNN
// is hidden, on any CPU), bf16 products go through LibTorch's mm.
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
