// The process settings the two libraries under LibTorch's CPU ops read only
// when they load, fixed up before anything runs (hence a re-exec):
//
// - Two thread pools share the cores of a training step: OpenMP's (LibTorch's
//   element-wise ops and our kernels) and, with Debian's libopenblas0-pthread,
//   OpenBLAS's own. By default both keep spinning after their work is done
//   (OpenMP workers for a while, OpenBLAS workers with sched_yield), so each
//   pool steals the cores the other is computing on; on 2 cores that costs a
//   third to half of a step. OMP_WAIT_POLICY=PASSIVE and
//   OPENBLAS_THREAD_TIMEOUT=4 make idle threads sleep at once. A training
//   run whose products all run on OpenMP's pool (oneDNN's gemm, float32 and
//   bf16: ops/linear/cpu/onednn_gemm.h) has one pool to share the cores,
//   and there OpenMP keeps its default (its threads wait spinning for a
//   while, then sleep): sleeping at once cost a wake-up between every two
//   ops, 8-20% of a step of configs/real.yaml on 2 cores.
// - OpenBLAS picks its kernels by CPU model, and for a model newer than it
//   knows (Debian bookworm's 0.3.21 on Sapphire and Emerald Rapids Xeons) it
//   falls back to its generic Prescott (SSE3) kernels: float32 matrix
//   multiplies, nearly all of a float32 training step, run 3-6 times slower
//   than its AVX-512 kernels on the same CPU. Where OpenBLAS chose such a
//   generic kernel set and the CPU has AVX2 (or AVX-512), OPENBLAS_CORETYPE
//   names the kernels the CPU runs: Haswell (or SkylakeX).
#pragma once

#include <string>

namespace nmt {

// Call first thing in main(). Unless the variables are already set (a
// user's own choice wins; NMT_THREAD_POOLS_SET=1 leaves everything as it
// is), sets them and re-executes this program with the same arguments;
// returns normally once they are in place, or when the re-exec is
// impossible (then the program runs as it is, only slower).
// one_pool_training: a `train` command here runs all its products on
// OpenMP's pool (then OMP_WAIT_POLICY is left to OpenMP's default for it).
void ensure_library_settings(char** argv, bool one_pool_training = false);

// OpenBLAS's own thread count (LibTorch's set_num_threads does not reach it),
// when the BLAS in use is OpenBLAS; otherwise nothing.
void set_blas_threads(int threads);

// The BLAS behind LibTorch's CPU matrix multiplies and its kernels, in words
// ("OpenBLAS 0.3.21, SkylakeX kernels", saying so when nmt chose them), or ""
// when it is not OpenBLAS.
std::string blas_kernels();

// For a training run: glibc's malloc keeps the memory a step frees for the
// next one instead of handing it back to the kernel. By default it maps
// arrays from 128 KB up (its threshold grows only to what was last freed)
// and trims its heap top, so every step's fresh tensors came back as new
// pages: about 1,900 page faults a step of configs/real.yaml in bf16
// (about 150 with this), and 2-3% of its time. The price is a resident size
// that stays at its peak, which a training run reaches every step anyway.
// Nothing where the C library is not glibc.
void keep_freed_memory_for_reuse();

// Whether an OpenBLAS kernel set (its core name, any case) is one of the
// pre-AVX2 ones it falls back to: Prescott, Nehalem, Sandybridge, ...
bool is_generic_openblas_core(const std::string& core);

}  // namespace nmt
