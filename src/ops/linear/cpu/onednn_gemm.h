// C = alpha · op(A) · op(B) + beta · C with a float32 C, on the CPU, through
// oneDNN's gemm: dnnl_gemm_bf16bf16f32 for bf16 A and B, dnnl_sgemm for
// float32 ones. oneDNN is the library LibTorch's own bf16 products run on,
// looked up in the process at run time (nmt links nothing more). Where the
// CPU has AMX or AVX512-BF16 the bf16 gemm runs their kernels, and both take
// any shape without compiling a kernel for it (a matmul primitive is built
// per shape, about 1 ms each).
//
// Why bf16: the weight gradient of a bf16 product is wanted in float32 (the
// optimizer's flat buffer). LibTorch's bf16 mm can only write bf16, so the
// gradient was rounded to bf16, widened again and added: three passes over
// the weight's size per product, and a bf16 rounding of every partial sum.
// Here the product adds itself into the float32 buffer in one pass, summed
// in float32 throughout.
//
// Why float32: LibTorch's float32 products run on its BLAS (Debian's
// OpenBLAS), whose own thread pool and OpenMP's (every other op of a step,
// and oneDNN) take the same cores in turns; each pool's threads must sleep
// the moment their work is done, or they steal the other's cores. oneDNN's
// sgemm runs on OpenMP's pool, so a training step that takes every product
// there has one pool, whose threads may wait for the next op spinning (no
// sleep and wake-up between ops). Its kernels are level with OpenBLAS's
// AVX-512 ones or ahead on a step's shapes (docs/bench/roofline.md).
// Plain pointers, no LibTorch.
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/linear/cpu/gemm_params.h"

namespace nmt::ops::cpu {

// Whether oneDNN's gemm for T is in this process (a LibTorch built with it)
// and runs on this CPU (its bf16 gemm needs AVX-512).
template <typename T>
bool onednn_gemm_available();
// Run the product; throw std::runtime_error when oneDNN reports a failure or
// is absent.
void onednn_gemm(const GemmParams<bf16>& p);
void onednn_gemm(const GemmParams<float>& p);

}  // namespace nmt::ops::cpu
