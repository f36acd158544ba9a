#include "util/thread_env.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

namespace nmt {

void ensure_quiet_thread_pools(char** argv) {
  constexpr const char* kMarker = "NMT_THREAD_POOLS_SET";
  if (std::getenv(kMarker)) return;  // this is the re-executed process (or the user opted out)
  ::setenv(kMarker, "1", 1);
  bool changed = false;
  for (const auto& [name, value] : {std::pair{"OMP_WAIT_POLICY", "PASSIVE"},
                                    std::pair{"OPENBLAS_THREAD_TIMEOUT", "4"}}) {
    if (std::getenv(name)) continue;
    ::setenv(name, value, 1);
    changed = true;
  }
  if (changed) ::execv("/proc/self/exe", argv);
}

void set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  if (auto* f = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    f(threads);
}

}  // namespace nmt
