// float32 GEMM libraries side by side at a training step's shapes: OpenBLAS
// (the kernels it picks, or those OPENBLAS_CORETYPE names), oneDNN's sgemm
// (the library LibTorch's bf16 products run on), Intel MKL's where
// libmkl_rt is installed, and nmt's own (src/ops/linear/cpu/sgemm_cpu.h):
// what NMT_CPU_GEMM chooses between. The libraries are looked up at run time
// so that none is a build dependency. Prints one row per shape: GFLOP/s of
// each (median of interleaved samples), oneDNN's over OpenBLAS's, MKL's and
// nmt's over oneDNN's, and the largest difference between their results.
//
// Usage: gemm_libraries [--threads N] [--samples S] [--no-openblas]
//   --no-openblas: leave OpenBLAS out (its column nan), as for the spinning
//   table below, where its calls would disturb the others' samples.
//   OPENBLAS_CORETYPE, DNNL_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS (e.g. AVX2)
//   and NMT_CPU_ISA choose the kernels. OpenMP's idle threads sleep at once
//   unless OMP_WAIT_POLICY says otherwise: OMP_WAIT_POLICY=ACTIVE times
//   oneDNN's, MKL's and nmt's as a training run runs them (spinning between
//   calls), and OpenBLAS's far slower (its pool and OpenMP's take turns).
// Exit 2 on a bad argument, 1 when no library is found.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/linear/cpu/float_gemm.h"
#include "ops/linear/cpu/sgemm_cpu.h"
#include "util/cpu_features.h"

namespace {

// cblas_sgemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), row-major = 101.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
// dnnl_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc): row-major.
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
using SetThreads = void (*)(int);
using GetName = char* (*)();

void* open_first(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* h = ::dlopen(n, RTLD_NOW | RTLD_GLOBAL)) return h;
  return nullptr;
}

// C[m, n] = op(A)[m, k] · op(B)[k, n]; 'T' reads the operand transposed, as
// a layer's backward pass does (dX = dY Wᵀ: NT; dW = Xᵀ dY: TN).
struct Shape {
  char ta, tb;
  int64_t m, k, n;
  const char* what;
};

// configs/real.yaml's step (d_model 256, ff 1024, 6,000 target pieces, about
// 2,100 target rows a batch; the output projection, weight [6000, 256],
// in chunks of 512 rows: ops/cross_entropy/linear_cross_entropy.cpp).
const Shape kShapes[] = {
    {'N', 'T', 512, 256, 6000, "output projection, forward (a chunk)"},
    {'N', 'N', 512, 6000, 256, "output projection, dX"},
    {'T', 'N', 6000, 512, 256, "output projection, dW"},
    {'N', 'N', 2100, 256, 768, "QKV projection, forward"},
    {'N', 'N', 2100, 256, 256, "attention output, forward"},
    {'N', 'N', 2100, 256, 1024, "feed-forward in, forward"},
    {'N', 'T', 2100, 1024, 256, "feed-forward in, dX"},
    {'T', 'N', 256, 2100, 1024, "feed-forward in, dW"},
    {'N', 'N', 2100, 1024, 256, "feed-forward out, forward"},
    {'T', 'N', 1024, 2100, 256, "feed-forward out, dW"},
    {'T', 'N', 256, 2100, 768, "QKV projection, dW"},
    {'T', 'N', 256, 2100, 256, "attention output, dW"},
    // configs/base.yaml's weight gradients (d_model 512, ff 2048, about
    // 3,000 rows a batch): where nmt's sgemm takes them held to AVX2 and
    // where not (ops/linear/cpu/float_gemm.cpp).
    {'T', 'N', 512, 3000, 2048, "base: feed-forward in, dW"},
    {'T', 'N', 512, 3000, 1536, "base: QKV projection, dW"},
    {'T', 'N', 512, 3000, 512, "base: attention output, dW"},
};

template <typename Fn>
double seconds_per_call(Fn&& fn) {
  int64_t calls = 0;
  double elapsed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed < 0.05);
  return elapsed / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, samples = 7;
  bool with_openblas = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--no-openblas") {
      with_openblas = false;
    } else if ((a == "--threads" || a == "--samples") && has_value) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 256) {
        std::fprintf(stderr, "gemm_libraries: %s: '%s' is not a whole number in [1, 256]\n", a.c_str(), argv[i]);
        return 2;
      }
      (a == "--threads" ? threads : samples) = static_cast<int>(v);
    } else {
      std::fprintf(stderr, "gemm_libraries: unknown argument %s (usage: gemm_libraries [--threads N] [--samples S] [--no-openblas])\n",
                   a.c_str());
      return 2;
    }
  }
  // oneDNN and MKL thread with OpenMP, OpenBLAS with its own pool: set
  // before they load. Idle threads of both pools sleep at once (as nmt sets
  // them outside a training run), or one library's spinning threads take
  // the cores from the next one's samples.
  ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  ::setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
  void* blas = with_openblas ? open_first({"libopenblas.so.0", "libopenblas.so"}) : nullptr;
  void* dnnl = open_first({"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"});
  auto* sgemm = blas ? reinterpret_cast<CblasSgemm>(::dlsym(blas, "cblas_sgemm")) : nullptr;
  auto* dsgemm = dnnl ? reinterpret_cast<DnnlSgemm>(::dlsym(dnnl, "dnnl_sgemm")) : nullptr;
  // MKL as training opens it (src/ops/linear/cpu/mkl_sgemm.cpp): on
  // OpenMP's threads, OMP_NUM_THREADS of them.
  const bool msgemm = nmt::ops::cpu::mkl_sgemm_available();
  if (!sgemm && !dsgemm && !msgemm) {
    std::fprintf(stderr,
                 "gemm_libraries: none of OpenBLAS (libopenblas.so.0), oneDNN (libdnnl.so.2), MKL (libmkl_rt.so) "
                 "found\n");
    return 1;
  }
  std::string core = "-";
  if (sgemm) {
    if (auto* f = reinterpret_cast<SetThreads>(::dlsym(blas, "openblas_set_num_threads"))) f(threads);
    if (auto* f = reinterpret_cast<GetName>(::dlsym(blas, "openblas_get_corename"))) core = f();
  }
  const auto isa = [](const char* var) { return std::getenv(var) ? std::getenv(var) : "its best ISA"; };
  std::printf("threads %d; OpenBLAS: %s; oneDNN: %s; MKL: %s; nmt: %s kernels\n", threads,
              sgemm ? (core + " kernels").c_str() : "absent", dsgemm ? isa("DNNL_MAX_CPU_ISA") : "absent",
              msgemm ? isa("MKL_ENABLE_INSTRUCTIONS") : "absent", nmt::isa_name(nmt::kernel_isa()));
  std::printf("%-30s %-26s %9s %9s %9s %9s %8s %8s %8s %9s\n", "shape", "op(A)[m,k] . op(B)[k,n]", "OpenBLAS",
              "oneDNN", "MKL", "nmt", "oneDNN/", "MKL/", "nmt/", "max diff");
  std::printf("%-30s %-26s %9s %9s %9s %9s %8s %8s %8s %9s\n", "", "", "GFLOP/s", "GFLOP/s", "GFLOP/s", "GFLOP/s",
              "OpenBLAS", "oneDNN", "oneDNN", "");
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (const Shape& s : kShapes) {
    std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n), d(s.m * s.n), e(s.m * s.n), f(s.m * s.n);
    for (float& x : a) x = normal(rng);
    for (float& x : b) x = normal(rng);
    const int64_t lda = s.ta == 'N' ? s.k : s.m, ldb = s.tb == 'N' ? s.n : s.k;
    const auto run_blas = [&] {
      sgemm(101, s.ta == 'N' ? 111 : 112, s.tb == 'N' ? 111 : 112, static_cast<int>(s.m), static_cast<int>(s.n),
            static_cast<int>(s.k), 1.f, a.data(), static_cast<int>(lda), b.data(), static_cast<int>(ldb), 0.f,
            c.data(), static_cast<int>(s.n));
    };
    const auto run_dnnl = [&] {
      dsgemm(s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, d.data(), s.n);
    };
    nmt::ops::cpu::GemmParams<float> mp;
    mp.trans_a = s.ta == 'T', mp.trans_b = s.tb == 'T', mp.m = s.m, mp.n = s.n, mp.k = s.k, mp.beta = 0;
    mp.a = a.data(), mp.lda = lda, mp.b = b.data(), mp.ldb = ldb, mp.c = e.data(), mp.ldc = s.n;
    const auto run_mkl = [&] { nmt::ops::cpu::mkl_sgemm(mp); };
    nmt::ops::cpu::GemmParams<float> np = mp;
    np.c = f.data();
    const auto run_nmt = [&] { nmt::ops::cpu::sgemm(np); };
    // Interleaved samples, after a warm-up call each (packing buffers, JIT).
    std::vector<double> tb, td, tm, tn;
    if (sgemm) run_blas();
    if (dsgemm) run_dnnl();
    if (msgemm) run_mkl();
    run_nmt();
    for (int i = 0; i < samples; ++i) {
      if (sgemm) tb.push_back(seconds_per_call(run_blas));
      if (dsgemm) td.push_back(seconds_per_call(run_dnnl));
      if (msgemm) tm.push_back(seconds_per_call(run_mkl));
      tn.push_back(seconds_per_call(run_nmt));
    }
    const double flop = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.k) * static_cast<double>(s.n);
    const double gb = sgemm ? flop / median(tb) / 1e9 : NAN, gd = dsgemm ? flop / median(td) / 1e9 : NAN;
    const double gm = msgemm ? flop / median(tm) / 1e9 : NAN, gn = flop / median(tn) / 1e9;
    // The largest difference between any two libraries' results.
    double diff = 0;
    const std::vector<float>* results[] = {sgemm ? &c : nullptr, dsgemm ? &d : nullptr, msgemm ? &e : nullptr, &f};
    for (int x = 0; x < 4; ++x)
      for (int y = x + 1; y < 4; ++y)
        if (results[x] && results[y])
          for (size_t i = 0; i < c.size(); ++i)
            diff = std::max(diff, static_cast<double>(std::fabs((*results[x])[i] - (*results[y])[i])));
    char shape[64];
    std::snprintf(shape, sizeof shape, "%c%c %ldx%ld . %ldx%ld", s.ta, s.tb, static_cast<long>(s.m),
                  static_cast<long>(s.k), static_cast<long>(s.k), static_cast<long>(s.n));
    std::printf("%-30s %-26s %9.1f %9.1f %9.1f %9.1f %8.2f %8.2f %8.2f %9.1e\n", s.what, shape, gb, gd, gm, gn, gd / gb,
                gm / gd, gn / gd, diff);
  }
  return 0;
}
