#include "ops/linear/cpu/float_gemm.h"

#include <cstdlib>

#include "util/cpu_features.h"
#include "util/errors.h"

namespace nmt::ops::cpu {

FloatGemmChoice choose_float_gemm(const std::string& want, bool onednn, bool mkl, bool intel_cpu) {
  FloatGemmChoice c;
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
    throw InputError("NMT_CPU_GEMM: '" + want + "' is not one of: auto | onednn | mkl");
  c.library = mkl && (intel_cpu || !onednn) ? FloatGemm::kMkl : FloatGemm::kOnednn;
  return c;
}

bool float_gemm_available() { return onednn_gemm_available<float>() || mkl_sgemm_available(); }

const FloatGemmChoice& float_gemm_choice() {
  static const FloatGemmChoice choice = [] {
    const char* env = std::getenv("NMT_CPU_GEMM");
    return choose_float_gemm(env ? env : "", onednn_gemm_available<float>(), mkl_sgemm_available(),
                             cpu_features().intel);
  }();
  return choice;
}

std::string float_gemm_description() {
  const FloatGemmChoice& c = float_gemm_choice();
  if (c.library == FloatGemm::kOnednn) return c.by_hand ? "oneDNN's sgemm (NMT_CPU_GEMM=onednn)" : "oneDNN's sgemm";
  return "MKL " + mkl_version() + "'s sgemm (" + (c.by_hand ? "NMT_CPU_GEMM=mkl" : "an Intel CPU") + ")";
}

void float_gemm_on(FloatGemm library, const GemmParams<float>& p) {
  if (library == FloatGemm::kMkl) {
    mkl_sgemm(p);
  } else {
    onednn_gemm(p);
  }
}

void float_gemm(const GemmParams<float>& p) { float_gemm_on(float_gemm_choice().library, p); }

}  // namespace nmt::ops::cpu
