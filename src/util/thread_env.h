// Two thread pools share the cores of a training step: OpenMP's (LibTorch's
// element-wise ops and our kernels) and, with Debian's libopenblas0-pthread,
// OpenBLAS's own. By default both keep spinning after their work is done
// (OpenMP workers for a while, OpenBLAS workers with sched_yield), so each
// pool steals the cores the other is computing on; on 2 cores that costs a
// third to half of a step. OMP_WAIT_POLICY=PASSIVE and
// OPENBLAS_THREAD_TIMEOUT=4 make idle threads sleep at once. Both libraries
// read them only when they load, hence a re-exec.
#pragma once

namespace nmt {

// Call first thing in main(). Unless the variables are already set (a
// user's own choice wins), sets them and re-executes this program with the
// same arguments; returns normally once they are in place, or when the
// re-exec is impossible (then the program runs as it is, only slower).
void ensure_quiet_thread_pools(char** argv);

// OpenBLAS's own thread count (LibTorch's set_num_threads does not reach it),
// when the BLAS in use is OpenBLAS; otherwise nothing.
void set_blas_threads(int threads);

}  // namespace nmt
