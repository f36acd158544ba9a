#include "ops/linear/cpu/onednn_gemm.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace nmt::ops::cpu {

namespace {

// oneDNN's C API (dnnl.h): row-major, dims as int64_t, status 0 on success.
using GemmBf16Fn = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                           int64_t lda, const void* b, int64_t ldb, float beta, float* c, int64_t ldc);

GemmBf16Fn gemm_fn() {
  // Looked up once: LibTorch loads libdnnl with itself where it was built
  // with it (Debian's does).
  static const GemmBf16Fn fn = reinterpret_cast<GemmBf16Fn>(::dlsym(RTLD_DEFAULT, "dnnl_gemm_bf16bf16f32"));
  return fn;
}

}  // namespace

bool onednn_gemm_bf16_available() { return gemm_fn() != nullptr; }

void onednn_gemm_bf16(const GemmBf16Params& p) {
  const GemmBf16Fn fn = gemm_fn();
  if (fn == nullptr) throw std::runtime_error("onednn_gemm_bf16: oneDNN's dnnl_gemm_bf16bf16f32 is not loaded");
  if (p.m == 0 || p.n == 0) return;
  const int status = fn(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b,
                        p.ldb, p.beta, p.c, p.ldc);
  if (status != 0)
    throw std::runtime_error("onednn_gemm_bf16: dnnl_gemm_bf16bf16f32 failed with status " + std::to_string(status) +
                             " (m " + std::to_string(p.m) + ", n " + std::to_string(p.n) + ", k " +
                             std::to_string(p.k) + ")");
}

}  // namespace nmt::ops::cpu
