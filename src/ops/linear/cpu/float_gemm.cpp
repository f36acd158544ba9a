#include "ops/linear/cpu/float_gemm.h"

#include <cstdlib>

#include "ops/linear/cpu/onednn_gemm.h"
#include "ops/linear/cpu/sgemm_cpu.h"
#include "util/cpu_features.h"
#include "util/errors.h"

namespace nmt::ops::cpu {

// Which weight gradients nmt's sgemm takes (measured on an AMD EPYC held
// to AVX2, bench/bench_gemm_libraries.sh): a long k (a batch's rows), where
// oneDNN's AVX2 `Aᵀ · B` is slow (the output projection's chunks, k of 128
// rows, run well on it); a gradient of at most 2^18 elements (1 MiB, which
// L2 holds while nmt's passes over k read and write it again): configs/
// real.yaml's, 1.0-2.0x oneDNN's speed, and Transformer-base's attention
// output (512 x 512, 1.2-1.5x), where base's feed-forward and QKV gradients
// (512 x 2048, 2048 x 512, 512 x 1536) ran at 0.8-0.96x; and at least 32
// rows and columns: a product of a few is a matrix-vector one, which a
// blocked gemm would spend on packing.
constexpr int64_t kLongK = 512;
constexpr int64_t kMaxGradient = int64_t{1} << 18;
constexpr int64_t kMinSide = 32;

bool is_long_weight_gradient(const GemmParams<float>& p) {
  return p.trans_a && !p.trans_b && p.k >= kLongK && p.m >= kMinSide && p.n >= kMinSide &&
         p.m * p.n <= kMaxGradient;
}

FloatGemmChoice choose_float_gemm(const std::string& want, bool onednn, bool mkl, bool intel_cpu,
                                  bool avx2_kernels) {
  FloatGemmChoice c;
  if (want == "nmt") {
    c.library = FloatGemm::kNmt;
    c.by_hand = true;
    return c;
  }
  if (want == "onednn" || want == "mkl") {
    const bool mkl_wanted = want == "mkl";
    if (mkl_wanted ? !mkl : !onednn)
      throw InputError("NMT_CPU_GEMM: " + want + " is not in this process (" +
                       (mkl_wanted ? "Intel MKL's libmkl_rt.so: Debian's libmkl-rt, in non-free"
                                   : "oneDNN: a LibTorch built with it") +
                       ")");
    c.library = mkl_wanted ? FloatGemm::kMkl : FloatGemm::kOnednn;
    c.by_hand = true;
    return c;
  }
  if (!want.empty() && want != "auto")
    throw InputError("NMT_CPU_GEMM: '" + want + "' is not one of: auto | onednn | mkl | nmt");
  if (mkl && intel_cpu)
    c.library = FloatGemm::kMkl;
  else if (onednn || !mkl)
    c.library = FloatGemm::kOnednn;
  else
    c.library = FloatGemm::kNmt;  // MKL alone, another vendor's CPU (float_gemm.h)
  c.weight_gradients_on_nmt = c.library == FloatGemm::kOnednn && avx2_kernels;
  return c;
}

bool float_gemm_available() { return onednn_gemm_available<float>() || mkl_sgemm_available(); }

const FloatGemmChoice& float_gemm_choice() {
  static const FloatGemmChoice choice = [] {
    const char* env = std::getenv("NMT_CPU_GEMM");
    return choose_float_gemm(env ? env : "", onednn_gemm_available<float>(), mkl_sgemm_available(),
                             cpu_features().intel, kernel_isa() == CpuIsa::kAvx2);
  }();
  return choice;
}

std::string float_gemm_description() {
  const FloatGemmChoice& c = float_gemm_choice();
  if (c.library == FloatGemm::kNmt)
    return c.by_hand ? "nmt's sgemm (NMT_CPU_GEMM=nmt)" : "nmt's sgemm (MKL's alone in this process, not an Intel CPU)";
  if (c.weight_gradients_on_nmt) return "oneDNN's sgemm, nmt's for the weight gradients (AVX2 kernels)";
  if (c.library == FloatGemm::kOnednn) return c.by_hand ? "oneDNN's sgemm (NMT_CPU_GEMM=onednn)" : "oneDNN's sgemm";
  return "MKL " + mkl_version() + "'s sgemm (" + mkl_source() + ", " +
         (c.by_hand ? "NMT_CPU_GEMM=mkl" : onednn_gemm_available<float>() ? "an Intel CPU" : "no oneDNN exported") + ")";
}

void float_gemm_on(FloatGemm library, const GemmParams<float>& p) {
  switch (library) {
    case FloatGemm::kMkl: return mkl_sgemm(p);
    case FloatGemm::kNmt: return sgemm(p);
    case FloatGemm::kOnednn: break;
  }
  onednn_gemm(p);
}

Bf16Gemm choose_bf16_gemm(const std::string& want, bool onednn, bool mkl) {
  if (want == "mkl" && mkl) return Bf16Gemm::kMkl;
  return onednn ? Bf16Gemm::kOnednn : Bf16Gemm::kNone;
}

Bf16Gemm bf16_gemm_library() {
  static const Bf16Gemm library = [] {
    const char* env = std::getenv("NMT_CPU_GEMM");
    return choose_bf16_gemm(env ? env : "", onednn_gemm_available<bf16>(), mkl_bf16_gemm_available());
  }();
  return library;
}

bool bf16_gemm_available() { return bf16_gemm_library() != Bf16Gemm::kNone; }

std::string bf16_gemm_description() {
  switch (bf16_gemm_library()) {
    case Bf16Gemm::kOnednn: return "oneDNN's gemm";
    case Bf16Gemm::kMkl: return "MKL " + mkl_version() + "'s bf16 gemm (" + mkl_source() + ", NMT_CPU_GEMM=mkl)";
    case Bf16Gemm::kNone: break;
  }
  return "LibTorch's mm (no bf16 gemm with float32 output exported)";
}

void bf16_gemm(const GemmParams<bf16>& p) {
  if (bf16_gemm_library() == Bf16Gemm::kMkl) return mkl_bf16_gemm(p);
  onednn_gemm(p);
}

void float_gemm(const GemmParams<float>& p) {
  const FloatGemmChoice& c = float_gemm_choice();
  float_gemm_on(c.weight_gradients_on_nmt && is_long_weight_gradient(p) ? FloatGemm::kNmt : c.library, p);
}

}  // namespace nmt::ops::cpu
