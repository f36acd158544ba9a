// C += alpha · op(A) · op(B) with bf16 A and B and a float32 C, on the CPU,
// through oneDNN's gemm (dnnl_gemm_bf16bf16f32): the library LibTorch's own
// bf16 products run on, looked up in the process at run time (nmt links
// nothing more). Where the CPU has AMX or AVX512-BF16 it runs their kernels,
// and it takes any shape without compiling a kernel for it (a matmul
// primitive is built per shape, about 1 ms each).
//
// Why: the weight gradient of a bf16 product is wanted in float32 (the
// optimizer's flat buffer). LibTorch's bf16 mm can only write bf16, so the
// gradient was rounded to bf16, widened again and added: three passes over
// the weight's size per product, and a bf16 rounding of every partial sum.
// Here the product adds itself into the float32 buffer in one pass, summed
// in float32 throughout. Plain pointers, no LibTorch.
#pragma once

#include <cstdint>

#include "ops/bf16.h"

namespace nmt::ops::cpu {

struct GemmBf16Params {
  bool trans_a = false, trans_b = false;  // op(X) = Xᵀ when set
  int64_t m = 0, n = 0, k = 0;            // op(A): [m, k], op(B): [k, n], C: [m, n]
  float alpha = 1, beta = 1;              // C = alpha op(A) op(B) + beta C
  const bf16* a = nullptr;                // A: row-major, leading dimension lda
  const bf16* b = nullptr;                // B: row-major, leading dimension ldb
  float* c = nullptr;                     // C: [m, n] row-major, leading dimension ldc
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// Whether oneDNN's bf16 gemm is in this process (a LibTorch built with it).
bool onednn_gemm_bf16_available();
// Runs the product; throws std::runtime_error when oneDNN reports a failure
// or is absent.
void onednn_gemm_bf16(const GemmBf16Params& p);

}  // namespace nmt::ops::cpu
