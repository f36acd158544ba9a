#include "ops/linear/cpu/onednn_gemm.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>
#include <type_traits>

namespace nmt::ops::cpu {

namespace {

// oneDNN's C API (dnnl.h): row-major, dims as int64_t, status 0 on success.
using GemmFn = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                       int64_t lda, const void* b, int64_t ldb, float beta, float* c, int64_t ldc);

template <typename T>
constexpr const char* kGemmName = std::is_same_v<T, float> ? "dnnl_sgemm" : "dnnl_gemm_bf16bf16f32";

template <typename T>
GemmFn gemm_fn() {
  // Looked up once: LibTorch loads libdnnl with itself where it was built
  // with it (Debian's does).
  static const GemmFn fn = reinterpret_cast<GemmFn>(::dlsym(RTLD_DEFAULT, kGemmName<T>));
  return fn;
}

template <typename T>
void run(const GemmParams<T>& p) {
  const GemmFn fn = gemm_fn<T>();
  if (fn == nullptr) throw std::runtime_error(std::string("onednn_gemm: oneDNN's ") + kGemmName<T> + " is not loaded");
  if (p.m == 0 || p.n == 0) return;
  const int status = fn(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b,
                        p.ldb, p.beta, p.c, p.ldc);
  if (status != 0)
    throw std::runtime_error(std::string("onednn_gemm: ") + kGemmName<T> + " failed with status " +
                             std::to_string(status) + " (m " + std::to_string(p.m) + ", n " + std::to_string(p.n) +
                             ", k " + std::to_string(p.k) + ")");
}

}  // namespace

template <typename T>
bool onednn_gemm_available() {
  // oneDNN exports both gemms on every CPU but runs its bf16 one only on
  // cores with AVX-512 (on an AVX2-only AMD EPYC it answers 3,
  // "unimplemented", for every shape): a 1 x 1 x 1 product, asked once,
  // says whether this CPU has it.
  static const bool available = [] {
    const GemmFn fn = gemm_fn<T>();
    if (fn == nullptr) return false;
    T one;
    if constexpr (std::is_same_v<T, float>)
      one = 1.0f;
    else
      one = to_bf16(1.0f);
    float c = 0;
    return fn('N', 'N', 1, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &c, 1) == 0 && c == 1.0f;
  }();
  return available;
}
template bool onednn_gemm_available<bf16>();
template bool onednn_gemm_available<float>();

void onednn_gemm(const GemmParams<bf16>& p) { run(p); }
void onednn_gemm(const GemmParams<float>& p) { run(p); }

}  // namespace nmt::ops::cpu
