#include "util/thread_env.h"

#include <dlfcn.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <utility>

#include "util/cpu_features.h"

namespace nmt {

namespace {

// What OpenBLAS chose by itself, when nmt named other kernels (for the log).
constexpr const char* kOpenBlasChose = "NMT_OPENBLAS_CHOSE";

// OpenBLAS's name of the kernel set in use, or null when the BLAS is not
// OpenBLAS (looked up at run time: LibTorch may come with another BLAS).
const char* openblas_core() {
  using GetName = char* (*)();
  auto* f = reinterpret_cast<GetName>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return f ? f() : nullptr;
}

// The OpenBLAS kernels this CPU runs best, as OPENBLAS_CORETYPE names them;
// null below AVX2. (Asked of the CPU, not of NMT_CPU_ISA: that variable
// lowers our kernels, not the libraries'.)
const char* fitting_openblas_core() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  return nullptr;
}

}  // namespace

bool is_generic_openblas_core(const std::string& core) {
  std::string c = core;
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::tolower(ch); });
  // OpenBLAS's x86-64 kernel sets older than AVX2 (driver/others/dynamic.c).
  static const char* const kGeneric[] = {"unknown", "katmai",   "coppermine", "northwood",    "prescott",
                                         "banias",  "atom",     "core2",      "penryn",       "dunnington",
                                         "nehalem", "athlon",   "opteron",    "opteron_sse3", "barcelona",
                                         "nano",    "bobcat",   "sandybridge", "bulldozer",   "piledriver",
                                         "steamroller"};
  return std::find(std::begin(kGeneric), std::end(kGeneric), c) != std::end(kGeneric);
}

void ensure_library_settings(char** argv, bool one_pool_training) {
  constexpr const char* kMarker = "NMT_THREAD_POOLS_SET";
  if (std::getenv(kMarker)) return;  // this is the re-executed process (or the user opted out)
  ::setenv(kMarker, "1", 1);
  // The subcommand: the first argument that is not an option.
  const char* command = "";
  for (char** a = argv + 1; *a; ++a)
    if ((*a)[0] != '-') {
      command = *a;
      break;
    }
  const bool one_pool = one_pool_training && std::strcmp(command, "train") == 0;
  bool changed = false;
  for (const auto& [name, value] : {std::pair{"OMP_WAIT_POLICY", "PASSIVE"},
                                    std::pair{"OPENBLAS_THREAD_TIMEOUT", "4"}}) {
    if (std::getenv(name) || (one_pool && std::strcmp(name, "OMP_WAIT_POLICY") == 0)) continue;
    ::setenv(name, value, 1);
    changed = true;
  }
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const char* core = openblas_core();
    const char* fit = fitting_openblas_core();
    if (core && fit && is_generic_openblas_core(core)) {
      ::setenv(kOpenBlasChose, core, 1);
      ::setenv("OPENBLAS_CORETYPE", fit, 1);
      changed = true;
    }
  }
  if (changed) ::execv("/proc/self/exe", argv);
}

void keep_freed_memory_for_reuse() {
#ifdef __GLIBC__
  // Arrays mapped from 32 MB up only (glibc's largest threshold), a heap
  // trimmed only when 2 GB at its top are free, grown 64 MB at a time.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, INT_MAX);
  ::mallopt(M_TOP_PAD, 64 << 20);
#endif
}

void set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  if (auto* f = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    f(threads);
}

std::string blas_kernels() {
  const char* core = openblas_core();
  if (!core) return "";
  using GetConfig = char* (*)();
  std::string version;
  if (auto* f = reinterpret_cast<GetConfig>(::dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    std::istringstream words(f());  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64"
    std::string name;
    words >> name >> version;
  }
  std::string s = "OpenBLAS" + (version.empty() ? std::string() : " " + version) + ", " + core + " kernels";
  const bool generic = is_generic_openblas_core(core);
  const char* chose = std::getenv(kOpenBlasChose);
  if (chose && std::getenv("OPENBLAS_CORETYPE") && !generic)
    return s + " (set by nmt: OpenBLAS chose its generic " + chose + " kernels for this CPU model)";
  if (const char* fit = fitting_openblas_core(); generic && fit)
    return s + " (generic kernels on a CPU that runs its " + fit +
           " kernels: float32 matrix multiplies several times slower; OPENBLAS_CORETYPE=" + fit + " selects them)";
  return s;
}

}  // namespace nmt
