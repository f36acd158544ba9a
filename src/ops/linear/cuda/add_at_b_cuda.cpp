// add_at_b for bf16 on a GPU (compiled only against a LibTorch with CUDA):
// one cuBLAS product with bf16 inputs and a float32 output that it adds to
// (beta 1) or overwrites (beta 0), on LibTorch's current stream and handle.
// LibTorch's own products write their output in the inputs' dtype, which
// would need a bf16 gradient, a widening and an add.
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

#include "ops/linear/dense.h"
#include "ops/op_glue.h"

namespace nmt::ops {

void add_at_b_bf16_cuda(at::Tensor& g, const at::Tensor& a, const at::Tensor& c, float beta) {
  // Row-major g [M, K] is column-major gᵀ [K, M] (leading dimension K), and
  // gᵀ += cᵀ a: cᵀ is c's memory as it is (column-major [K, N], ld K), a is
  // the transpose of its memory read column-major ([M, N], ld M).
  TORCH_CHECK(g.is_contiguous() && a.is_contiguous() && c.is_contiguous(), "add_at_b: contiguous tensors only");
  const int64_t n = a.size(0), m = a.size(1), k = c.size(1);
  if (n == 0 || m == 0 || k == 0) return;
  TORCH_CHECK(n <= INT32_MAX && m <= INT32_MAX && k <= INT32_MAX, "add_at_b: sizes beyond cuBLAS's int");
  glue::cuda_stream_for(g);  // g's device is the current one
  const float alpha = 1.0f;
  const cublasStatus_t status =
      cublasGemmEx(at::cuda::getCurrentCUDABlasHandle(), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(k),
                   static_cast<int>(m), static_cast<int>(n), &alpha, c.data_ptr(), CUDA_R_16BF, static_cast<int>(k),
                   a.data_ptr(), CUDA_R_16BF, static_cast<int>(m), &beta, g.data_ptr(), CUDA_R_32F,
                   static_cast<int>(k), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "add_at_b (cuBLAS bf16 -> float32) failed: status ",
              static_cast<int>(status));
}

}  // namespace nmt::ops
