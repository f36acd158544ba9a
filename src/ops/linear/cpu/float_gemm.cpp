#include "ops/linear/cpu/float_gemm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "util/errors.h"

namespace nmt::ops::cpu {

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// oneDNN's time over MKL's on three products of a Transformer layer's
// shapes (2,048 tokens, d_model 256, feed-forward 1,024), each as a step runs
// it: the forward x · W, the input gradient dY · Wᵀ and the weight gradient
// Xᵀ · dY added into its buffer. Median of three alternated calls per
// library and shape, after one call each to warm up.
double measure_mkl_speedup() {
  constexpr int64_t kTokens = 2048, kModel = 256, kHidden = 1024;
  std::vector<float> x(kTokens * kHidden, 0.01f), w(kModel * kHidden, 0.02f), y(kTokens * kHidden, 0.0f);
  GemmParams<float> shapes[3];
  // forward: [N, d] . [d, f] -> [N, f]
  shapes[0].m = kTokens, shapes[0].k = kModel, shapes[0].n = kHidden;
  shapes[0].a = x.data(), shapes[0].lda = kModel, shapes[0].b = w.data(), shapes[0].ldb = kHidden;
  shapes[0].c = y.data(), shapes[0].ldc = kHidden, shapes[0].beta = 0;
  // input gradient: [N, f] . [d, f]ᵀ -> [N, d]
  shapes[1].m = kTokens, shapes[1].k = kHidden, shapes[1].n = kModel, shapes[1].trans_b = true;
  shapes[1].a = x.data(), shapes[1].lda = kHidden, shapes[1].b = w.data(), shapes[1].ldb = kHidden;
  shapes[1].c = y.data(), shapes[1].ldc = kModel, shapes[1].beta = 0;
  // weight gradient: [N, f]ᵀ . [N, d] -> [f, d], added
  shapes[2].m = kHidden, shapes[2].k = kTokens, shapes[2].n = kModel, shapes[2].trans_a = true;
  shapes[2].a = x.data(), shapes[2].lda = kHidden, shapes[2].b = y.data(), shapes[2].ldb = kModel;
  shapes[2].c = w.data(), shapes[2].ldc = kModel, shapes[2].beta = 1;
  double total[2] = {0, 0};
  for (const GemmParams<float>& p : shapes) {
    std::vector<double> times[2];
    for (int round = 0; round < 4; ++round) {
      for (int lib = 0; lib < 2; ++lib) {
        const double t0 = seconds_now();
        float_gemm_on(lib == 0 ? FloatGemm::kOnednn : FloatGemm::kMkl, p);
        if (round > 0) times[lib].push_back(seconds_now() - t0);
      }
    }
    for (int lib = 0; lib < 2; ++lib) {
      std::sort(times[lib].begin(), times[lib].end());
      total[lib] += times[lib][times[lib].size() / 2];
    }
  }
  return total[1] > 0 ? total[0] / total[1] : 0;
}

}  // namespace

void throw_float_gemm_error(const std::string& message) { throw InputError(message); }

bool float_gemm_available() { return onednn_gemm_available<float>() || mkl_sgemm_available(); }

void check_float_gemm_setting() {
  const char* env = std::getenv("NMT_CPU_GEMM");
  choose_float_gemm(env ? env : "", onednn_gemm_available<float>(), mkl_sgemm_available(), [] { return 0.0; });
}

const FloatGemmChoice& float_gemm_choice() {
  static const FloatGemmChoice choice = [] {
    const char* env = std::getenv("NMT_CPU_GEMM");
    return choose_float_gemm(env ? env : "", onednn_gemm_available<float>(), mkl_sgemm_available(),
                             measure_mkl_speedup);
  }();
  return choice;
}

std::string float_gemm_description() {
  const FloatGemmChoice& c = float_gemm_choice();
  if (c.library == FloatGemm::kOnednn) {
    if (!c.measured) return "oneDNN's sgemm";
    char why[96];
    std::snprintf(why, sizeof why, " (MKL's ran its products at %.2fx its speed here; MKL from %.2fx)", c.mkl_speedup,
                  kMklPays);
    return "oneDNN's sgemm" + std::string(why);
  }
  const std::string name = "MKL " + mkl_version() + "'s sgemm";
  if (!c.measured) return name;
  char why[64];
  std::snprintf(why, sizeof why, " (%.2fx oneDNN's speed here)", c.mkl_speedup);
  return name + why;
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
