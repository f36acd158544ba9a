// Intel MKL's gemms, looked up at run time (float_gemm.h says when they run):
// in the process first, where LibTorch carries MKL inside itself and exports
// its BLAS (PyPI's torch and the LibTorch archives of pytorch.org link MKL
// statically; their oneDNN is hidden, so without this their float32 products
// could only run through LibTorch's own mm), else Intel's single dynamic
// library, libmkl_rt (Debian: libmkl-rt, in non-free).
#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "ops/linear/cpu/float_gemm.h"

namespace nmt::ops::cpu {

namespace {

// MKL's C interface (mkl_cblas.h, mkl_service.h) with 32-bit integers
// (its LP64 interface layer), and its Fortran sgemm (column-major, every
// argument by address), which LibTorch's copy exports instead of cblas_sgemm.
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
constexpr int kInterfaceLp64 = 0, kThreadingGnu = 3;
using CblasSgemmFn = void (*)(int layout, int transa, int transb, int m, int n, int k, float alpha, const float* a,
                              int lda, const float* b, int ldb, float beta, float* c, int ldc);
using FortranSgemmFn = void (*)(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                                const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                                const float* beta, float* c, const int* ldc);
using CblasBf16GemmFn = void (*)(int layout, int transa, int transb, int m, int n, int k, float alpha,
                                 const bf16* a, int lda, const bf16* b, int ldb, float beta, float* c, int ldc);
using SetLayerFn = int (*)(int);
using VersionFn = void (*)(char* buffer, int length);

struct Mkl {
  CblasSgemmFn cblas_sgemm = nullptr;
  FortranSgemmFn fortran_sgemm = nullptr;
  CblasBf16GemmFn bf16_gemm = nullptr;
  std::string version;
  bool in_libtorch = false;
};

// "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build ..." -> "2024.2"
std::string short_version(VersionFn version) {
  if (version == nullptr) return "";
  char buffer[256] = {};
  version(buffer, sizeof buffer - 1);
  std::string v = buffer;
  const size_t at = v.find("Version ");
  if (at == std::string::npos) return v;
  v = v.substr(at + 8);
  return v.substr(0, v.find_first_of(" -"));
}

// MKL already in the process: the library that defines MKL_Get_Version_String
// (so that a BLAS of another vendor's, OpenBLAS's sgemm_ in Debian's LibTorch,
// is never taken for MKL's), its gemms taken from that same library. It runs
// on the threading layer it was linked with: GNU OpenMP's in LibTorch's copy,
// the pool LibTorch and nmt run on.
Mkl in_process() {
  Mkl out;
  void* version = ::dlsym(RTLD_DEFAULT, "MKL_Get_Version_String");
  Dl_info info{};
  if (version == nullptr || ::dladdr(version, &info) == 0 || info.dli_fname == nullptr) return out;
  void* lib = ::dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return out;
  out.cblas_sgemm = reinterpret_cast<CblasSgemmFn>(::dlsym(lib, "cblas_sgemm"));
  if (out.cblas_sgemm == nullptr) out.fortran_sgemm = reinterpret_cast<FortranSgemmFn>(::dlsym(lib, "sgemm_"));
  out.bf16_gemm = reinterpret_cast<CblasBf16GemmFn>(::dlsym(lib, "cblas_gemm_bf16bf16f32"));
  out.version = short_version(reinterpret_cast<VersionFn>(version));
  out.in_libtorch = true;
  return out;
}

Mkl runtime_library() {
  Mkl out;
  void* lib = ::dlopen("libmkl_rt.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = ::dlopen("libmkl_rt.so.2", RTLD_NOW | RTLD_LOCAL);  // oneMKL 2021+
  if (lib == nullptr) return out;
  const auto interface_layer = reinterpret_cast<SetLayerFn>(::dlsym(lib, "MKL_Set_Interface_Layer"));
  const auto threading_layer = reinterpret_cast<SetLayerFn>(::dlsym(lib, "MKL_Set_Threading_Layer"));
  const auto sgemm = reinterpret_cast<CblasSgemmFn>(::dlsym(lib, "cblas_sgemm"));
  if (interface_layer == nullptr || threading_layer == nullptr || sgemm == nullptr) return out;
  // Before MKL's first computation: 32-bit integers, and OpenMP's (GNU)
  // threads rather than Intel's own OpenMP runtime, a second pool. Each
  // returns the layer in force, which differs when MKL refused it.
  if (interface_layer(kInterfaceLp64) != kInterfaceLp64 || threading_layer(kThreadingGnu) != kThreadingGnu)
    return out;
  out.cblas_sgemm = sgemm;
  out.bf16_gemm = reinterpret_cast<CblasBf16GemmFn>(::dlsym(lib, "cblas_gemm_bf16bf16f32"));
  out.version = short_version(reinterpret_cast<VersionFn>(::dlsym(lib, "MKL_Get_Version_String")));
  return out;
}

const Mkl& mkl() {
  static const Mkl m = [] {
    Mkl found = in_process();
    return found.cblas_sgemm != nullptr || found.fortran_sgemm != nullptr ? found : runtime_library();
  }();
  return m;
}

// Its 32-bit interface: every dimension and leading dimension must fit.
template <typename T>
void check_sizes(const GemmParams<T>& p, const char* what) {
  constexpr int64_t kMax = 0x7fffffff;
  if (p.m > kMax || p.n > kMax || p.k > kMax || p.lda > kMax || p.ldb > kMax || p.ldc > kMax)
    throw std::runtime_error(std::string(what) + ": a dimension past 2^31 - 1 (m " + std::to_string(p.m) + ", n " +
                             std::to_string(p.n) + ", k " + std::to_string(p.k) + ")");
}

}  // namespace

bool mkl_sgemm_available() { return mkl().cblas_sgemm != nullptr || mkl().fortran_sgemm != nullptr; }
bool mkl_bf16_gemm_available() { return mkl_sgemm_available() && mkl().bf16_gemm != nullptr; }

std::string mkl_version() { return mkl().version; }
std::string mkl_source() {
  if (!mkl_sgemm_available()) return "";
  return mkl().in_libtorch ? "in LibTorch" : "libmkl_rt";
}

void mkl_sgemm(const GemmParams<float>& p) {
  const Mkl& m = mkl();
  if (!mkl_sgemm_available()) throw std::runtime_error("mkl_sgemm: Intel MKL is not in this process");
  if (p.m == 0 || p.n == 0) return;
  check_sizes(p, "mkl_sgemm");
  const int mi = static_cast<int>(p.m), ni = static_cast<int>(p.n), ki = static_cast<int>(p.k);
  const int lda = static_cast<int>(p.lda), ldb = static_cast<int>(p.ldb), ldc = static_cast<int>(p.ldc);
  if (m.cblas_sgemm != nullptr) {
    m.cblas_sgemm(kCblasRowMajor, p.trans_a ? kCblasTrans : kCblasNoTrans, p.trans_b ? kCblasTrans : kCblasNoTrans,
                  mi, ni, ki, p.alpha, p.a, lda, p.b, ldb, p.beta, p.c, ldc);
    return;
  }
  // Column-major, C is Cᵀ: Cᵀ = op(B)ᵀ op(A)ᵀ, with B (row-major, ldb) read
  // as the column-major Bᵀ, A likewise; so the operands swap, not the flags.
  const char ta = p.trans_a ? 'T' : 'N', tb = p.trans_b ? 'T' : 'N';
  m.fortran_sgemm(&tb, &ta, &ni, &mi, &ki, &p.alpha, p.b, &ldb, p.a, &lda, &p.beta, p.c, &ldc);
}

void mkl_bf16_gemm(const GemmParams<bf16>& p) {
  const Mkl& m = mkl();
  if (!mkl_bf16_gemm_available()) throw std::runtime_error("mkl_bf16_gemm: Intel MKL's bf16 gemm is not in this process");
  if (p.m == 0 || p.n == 0) return;
  check_sizes(p, "mkl_bf16_gemm");
  m.bf16_gemm(kCblasRowMajor, p.trans_a ? kCblasTrans : kCblasNoTrans, p.trans_b ? kCblasTrans : kCblasNoTrans,
              static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), p.alpha, p.a,
              static_cast<int>(p.lda), p.b, static_cast<int>(p.ldb), p.beta, p.c, static_cast<int>(p.ldc));
}

}  // namespace nmt::ops::cpu
