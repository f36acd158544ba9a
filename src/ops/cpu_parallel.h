// OpenMP regions that cost nothing where they would run on one thread. A
// worker of the service, or of parallel decoding batches, runs its ops on
// one thread; entering a region there still starts a team of one and ends
// it with a futex wake, a system call (0.35 us here), once per kernel call:
// 12 calls a decoder layer in a decoding step, 2 more, and one per row. Kernel
// sources only (compiled with OpenMP).
#pragma once

#include <omp.h>

#include <cstdint>

#ifndef NMT_KERNEL_ISA
#error "kernel sources are compiled once per instruction set with NMT_KERNEL_ISA defined (see CMakeLists.txt)"
#endif

// In the instruction set's own namespace, as ops/cpu_simd.h's helpers: the
// copies are compiled with different flags and must not be merged.
namespace nmt::ops::cpu::NMT_KERNEL_ISA::detail {

// Whether a region entered here would have this thread alone, and nothing
// around it to bind to: a worksharing loop then runs every iteration here
// (an orphaned `omp for` outside any region), exactly as a team of one would.
inline bool alone() { return omp_get_max_threads() == 1 && !omp_in_parallel(); }

// body() on a team of threads, or on this thread where the team would be
// this thread alone; its `omp for` loops share the work either way.
template <typename Body>
void in_team(Body&& body) {
  if (alone()) {
    body();
    return;
  }
#pragma omp parallel
  body();
}

// f(i) for every i in [0, n): shared out over a team (static schedule) where
// `worth` says the work pays for more threads and there are more, else on
// this thread in order.
template <typename F>
void parallel_for(int64_t n, bool worth, F&& f) {
  if (worth && !alone()) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA::detail
