// Intel MKL's sgemm through its single dynamic library, libmkl_rt, opened at
// run time (float_gemm.h says when it runs).
#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "ops/linear/cpu/float_gemm.h"

namespace nmt::ops::cpu {

namespace {

// MKL's C interface (mkl_cblas.h, mkl_service.h) with 32-bit integers
// (its LP64 interface layer).
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
constexpr int kInterfaceLp64 = 0, kThreadingGnu = 3;
using SgemmFn = void (*)(int layout, int transa, int transb, int m, int n, int k, float alpha, const float* a,
                         int lda, const float* b, int ldb, float beta, float* c, int ldc);
using SetLayerFn = int (*)(int);
using VersionFn = void (*)(char* buffer, int length);

struct Mkl {
  SgemmFn sgemm = nullptr;
  std::string version;
};

const Mkl& mkl() {
  static const Mkl m = [] {
    Mkl out;
    void* lib = ::dlopen("libmkl_rt.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = ::dlopen("libmkl_rt.so.2", RTLD_NOW | RTLD_LOCAL);  // oneMKL 2021+
    if (lib == nullptr) return out;
    const auto interface_layer = reinterpret_cast<SetLayerFn>(::dlsym(lib, "MKL_Set_Interface_Layer"));
    const auto threading_layer = reinterpret_cast<SetLayerFn>(::dlsym(lib, "MKL_Set_Threading_Layer"));
    const auto sgemm = reinterpret_cast<SgemmFn>(::dlsym(lib, "cblas_sgemm"));
    const auto version = reinterpret_cast<VersionFn>(::dlsym(lib, "MKL_Get_Version_String"));
    if (interface_layer == nullptr || threading_layer == nullptr || sgemm == nullptr) return out;
    // Before MKL's first computation: 32-bit integers, and OpenMP's (GNU)
    // threads rather than Intel's own OpenMP runtime, a second pool. Each
    // returns the layer in force, which differs when MKL refused it.
    if (interface_layer(kInterfaceLp64) != kInterfaceLp64 || threading_layer(kThreadingGnu) != kThreadingGnu)
      return out;
    out.sgemm = sgemm;
    if (version != nullptr) {
      char buffer[256] = {};
      version(buffer, sizeof buffer - 1);
      out.version = buffer;
      // "Intel(R) Math Kernel Library Version 2020.0.4 Product Build ..." -> "2020.0.4"
      const size_t at = out.version.find("Version ");
      if (at != std::string::npos) out.version = out.version.substr(at + 8, out.version.find(' ', at + 8) - at - 8);
    }
    return out;
  }();
  return m;
}

}  // namespace

bool mkl_sgemm_available() { return mkl().sgemm != nullptr; }

std::string mkl_version() { return mkl().version; }

void mkl_sgemm(const GemmParams<float>& p) {
  const SgemmFn fn = mkl().sgemm;
  if (fn == nullptr) throw std::runtime_error("mkl_sgemm: Intel MKL's libmkl_rt.so is not loaded");
  if (p.m == 0 || p.n == 0) return;
  // Its 32-bit interface: every dimension and leading dimension must fit.
  constexpr int64_t kMax = 0x7fffffff;
  if (p.m > kMax || p.n > kMax || p.k > kMax || p.lda > kMax || p.ldb > kMax || p.ldc > kMax)
    throw std::runtime_error("mkl_sgemm: a dimension past 2^31 - 1 (m " + std::to_string(p.m) + ", n " +
                             std::to_string(p.n) + ", k " + std::to_string(p.k) + ")");
  fn(kCblasRowMajor, p.trans_a ? kCblasTrans : kCblasNoTrans, p.trans_b ? kCblasTrans : kCblasNoTrans,
     static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), p.alpha, p.a, static_cast<int>(p.lda), p.b,
     static_cast<int>(p.ldb), p.beta, p.c, static_cast<int>(p.ldc));
}

}  // namespace nmt::ops::cpu
