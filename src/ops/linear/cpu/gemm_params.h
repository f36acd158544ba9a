// The operands of one product on the CPU, C = alpha · op(A) · op(B) + beta · C
// with a float32 C, as the CPU gemms take them: oneDNN's (onednn_gemm.h),
// MKL's (float_gemm.h) and nmt's own (sgemm_cpu.h). Plain C++.
#pragma once

#include <cstdint>

namespace nmt::ops::cpu {

// T: bf16 or float (A's and B's type; C is float32 either way).
template <typename T>
struct GemmParams {
  bool trans_a = false, trans_b = false;  // op(X) = Xᵀ when set
  int64_t m = 0, n = 0, k = 0;            // op(A): [m, k], op(B): [k, n], C: [m, n]
  float alpha = 1, beta = 1;              // C = alpha op(A) op(B) + beta C
  const T* a = nullptr;                   // A: row-major, leading dimension lda
  const T* b = nullptr;                   // B: row-major, leading dimension ldb
  float* c = nullptr;                     // C: [m, n] row-major, leading dimension ldc
  int64_t lda = 0, ldb = 0, ldc = 0;
};

}  // namespace nmt::ops::cpu
