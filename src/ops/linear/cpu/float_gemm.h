// The float32 products of a CPU training step (dense() and the fused
// cross-entropy), and the library that runs them: oneDNN's sgemm
// (onednn_gemm.h), or Intel MKL's where its runtime library is installed
// (Debian: libmkl-rt, in non-free) and runs them faster here.
//
// Why a second library: in a training step the products' operands come from
// memory other ops wrote moments before, not from the cache a benchmark
// leaves them in. On a Xeon with AMX (2 cores), oneDNN's sgemm ran a step's
// products at 74% of the speed their shapes reach alone, MKL's at 81%, and
// MKL ran the weight-gradient shapes (Aᵀ · B with A an activation, k the
// batch's tokens) 10-30% faster even alone; PyTorch's products are MKL's.
// On AMD CPUs MKL is known to take slower code paths, and nobody should have
// to know which library a CPU prefers: `auto` measures both on three
// products of a Transformer's shapes once per process and keeps the faster
// (MKL only from kMklPays times oneDNN's speed; oneDNN otherwise).
//
// MKL is looked up at run time (nmt links nothing more) and runs on
// OpenMP's threads (its GNU threading layer), the pool every other op of a
// step runs on, like oneDNN's (util/thread_env.h says why that matters).
// NMT_CPU_GEMM=auto | onednn | mkl chooses by hand. Plain C++, no LibTorch.
#pragma once

#include <string>

#include "ops/linear/cpu/onednn_gemm.h"

namespace nmt::ops::cpu {

enum class FloatGemm { kOnednn, kMkl };

// MKL from this many times oneDNN's speed on the measured products.
inline constexpr double kMklPays = 1.05;

struct FloatGemmChoice {
  FloatGemm library = FloatGemm::kOnednn;
  bool measured = false;      // auto, both libraries present: chosen by measurement
  double mkl_speedup = 0;     // oneDNN's time / MKL's on the measured products (when measured)
};

// The rule, apart from the measurement: want is NMT_CPU_GEMM ("" for auto).
// Throws InputError (exit 2) for an unknown name, or for a library asked for
// by name that is not in this process. `measure` runs only when auto has
// both libraries to choose from, and returns oneDNN's time over MKL's.
template <typename Measure>
FloatGemmChoice choose_float_gemm(const std::string& want, bool onednn, bool mkl, Measure&& measure);

// Whether any float32 gemm (oneDNN's or MKL's) can run here. Cheap: decides
// nothing and measures nothing.
bool float_gemm_available();
// Checks NMT_CPU_GEMM without measuring anything: throws InputError for a
// bad name or a library named that is not in the process (a bf16 run, which
// has no float32 products to measure, still rejects a bad setting).
void check_float_gemm_setting();
// The library in use, decided on first call (NMT_CPU_GEMM or a measurement
// of about 0.1 s); throws InputError for a bad NMT_CPU_GEMM.
const FloatGemmChoice& float_gemm_choice();
// "oneDNN's sgemm" or "MKL 2020.0.4's sgemm", with why ("1.12x oneDNN's here").
std::string float_gemm_description();
// C = alpha op(A) op(B) + beta C on the library in use.
void float_gemm(const GemmParams<float>& p);
// On one library, whichever is in use (tests and benchmarks).
void float_gemm_on(FloatGemm library, const GemmParams<float>& p);

// ---- MKL (libmkl_rt), looked up on first use -------------------------------
bool mkl_sgemm_available();
// "2020.0.4" or "" when absent.
std::string mkl_version();
// Throws std::runtime_error when MKL is absent.
void mkl_sgemm(const GemmParams<float>& p);

// ---- implementation of the template ---------------------------------------
[[noreturn]] void throw_float_gemm_error(const std::string& message);

template <typename Measure>
FloatGemmChoice choose_float_gemm(const std::string& want, bool onednn, bool mkl, Measure&& measure) {
  FloatGemmChoice c;
  if (want == "onednn" || want == "mkl") {
    const bool mkl_wanted = want == "mkl";
    if (mkl_wanted ? !mkl : !onednn)
      throw_float_gemm_error("NMT_CPU_GEMM: " + want + " is not in this process (" +
                             (mkl_wanted ? "Intel MKL's libmkl_rt.so: Debian's libmkl-rt, in non-free"
                                         : "oneDNN: a LibTorch built with it") +
                             ")");
    c.library = mkl_wanted ? FloatGemm::kMkl : FloatGemm::kOnednn;
    return c;
  }
  if (!want.empty() && want != "auto")
    throw_float_gemm_error("NMT_CPU_GEMM: '" + want + "' is not one of: auto | onednn | mkl");
  if (onednn && mkl) {
    c.measured = true;
    c.mkl_speedup = measure();
    c.library = c.mkl_speedup >= kMklPays ? FloatGemm::kMkl : FloatGemm::kOnednn;
  } else {
    c.library = mkl && !onednn ? FloatGemm::kMkl : FloatGemm::kOnednn;
  }
  return c;
}

}  // namespace nmt::ops::cpu
