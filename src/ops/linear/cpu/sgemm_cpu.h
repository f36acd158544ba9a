// nmt's own float32 gemm for the CPU: C = alpha · op(A) · op(B) + beta · C
// (GemmParams<float>), blocked as GotoBLAS and BLIS block it.
//
// Why one of our own: held to AVX2, oneDNN's sgemm runs `Aᵀ · B` with a long
// k (a layer's weight gradient, Xᵀ · dY summed over a batch's rows) at
// 45-80% of the speed it runs the same shape as `A · B`, and those products
// are a third of a training step's arithmetic (docs/bench/roofline.md).
// float_gemm.h says which products take this one.
//
// The scheme, per pass of kKc values of k and kNc columns of B:
//   pack B: op(B)[pc, pc+kc) x [jc, jc+nc) into panels of kNr columns,
//           [panels][kc][kNr], shared by the team (each packs some panels);
//   pack A: each thread, per block of kMc rows of op(A), into panels of kMr
//           rows, [panels][kc][kMr];
//   micro-kernel: a kMr x kNr tile of C in registers, summed over the pass's
//           k in order from one A panel and one B panel (both contiguous,
//           so either operand's transpose costs only its packing).
// The team shares each pass's (row block, column panel) pairs out in equal
// runs. Every element of C is summed in the same order (k in passes of kKc,
// in order within a pass) whatever the thread count, so results do not
// depend on it.
//
// One copy per instruction set (ops/cpu_isa.h): the tile is kMr rows of two
// vectors, 12 x 32 with AVX-512, 6 x 16 with AVX2, 6 x 8 otherwise.
// Plain C++, no LibTorch.
#pragma once

#include "ops/cpu_isa.h"
#include "ops/linear/cpu/gemm_params.h"

namespace nmt::ops::cpu {

#define NMT_DECLARE_SGEMM_KERNELS(isa)         \
  namespace isa {                              \
  void sgemm(const GemmParams<float>& p);      \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_SGEMM_KERNELS)
#undef NMT_DECLARE_SGEMM_KERNELS

// The copy for the instruction set chosen at run time. Writes only C's
// [m, n] (columns past n in each row stay); beta 0 does not read C.
inline void sgemm(const GemmParams<float>& p) { NMT_CPU_DISPATCH(sgemm, p); }

}  // namespace nmt::ops::cpu
