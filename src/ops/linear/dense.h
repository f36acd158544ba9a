// A dense layer's product for training (on a GPU, and on a CPU where
// LibTorch exports oneDNN or Intel MKL is in the process), with its weight gradient added where the
// optimizer reads it:
//   y = x w + b
// x: [N, in] in the matrix side's dtype (float32, or bf16 when matrix
// multiplies run in bf16), w: [in, out] and b: [out] float32 parameters,
// w_side and b_side the copies the product reads (w and b themselves for
// float32; bf16 copies of them, kept by the trainer, for bf16). bf16
// products on the CPU run in row blocks of shapes oneDNN has seen (the rows
// up to a multiple of kBf16RowQuantum, then the rest in a block of that
// many). The backward adds xᵀ dy into w's gradient buffer itself when w has
// one (FlatAdam's flat gradients): one product with float32 accumulation, no
// bf16 weight gradient to widen and add (cuBLAS on a GPU, oneDNN's gemm on a
// CPU); on a CPU the bias's column sums too, as a product of dy with a
// column of ones. float32 products on a CPU run on oneDNN's or MKL's sgemm, or
// nmt's (on OpenMP's threads, cpu/float_gemm.h says why and which), bf16 ones write bf16
// through LibTorch (oneDNN as well).
// Otherwise it returns the gradients as autograd expects.
#pragma once

#include <ATen/core/Tensor.h>

namespace nmt::ops {

// bf16 products on the CPU run on row counts that are multiples of this
// (dense(): in two blocks; the output projection's chunks: padded): the
// row count is a batch's token count, new almost every step, and oneDNN
// compiles a kernel for each new shape (about 1 ms); so a run sees few
// shapes. (cuBLAS on an H100 also spent about 0.3 ms of host time per new
// bf16 shape in a run's first steps, but the padding copies cost more than
// that over a run: dense() leaves GPU rows as they are.)
inline constexpr int64_t kBf16RowQuantum = 64;

// x: [N, ...] -> [N', ...] with N' = N rounded up to a multiple of quantum,
// rows of `fill` appended (x itself when N is a multiple already).
at::Tensor pad_rows(const at::Tensor& x, int64_t quantum, double fill = 0);

// An output of a fused op that dense() may read, as at::empty(sizes,
// options); bf16 on the CPU with room behind it: its storage holds the rows
// (the product of all sizes but the last) rounded up to kBf16RowQuantum,
// the extra rows zeros. dense() runs its product on all of them in one
// block (the extra output rows are the bias, or zeros, and never read)
// instead of a block and a padded copy of the last rows; its own outputs
// have that room too. The ops whose outputs feed dense() (the LayerNorm's
// output and its side gradient, the ReLU's output and gradient, attention's
// output and gradients) allocate theirs with it.
at::Tensor empty_with_row_room(at::IntArrayRef sizes, const at::TensorOptions& options);
inline at::Tensor empty_like_with_row_room(const at::Tensor& t) {
  return empty_with_row_room(t.sizes(), t.options());
}

// Whether a model's dense layer takes dense() for x and its weight w:
// float32 w, gradients wanted (inference keeps LibTorch's products), and
// either a GPU with the fused ops on (op_glue.h) and float32 or bf16 x, or
// a CPU with float32 or bf16 x and a gemm for it in the process (oneDNN's,
// or MKL's for float32: cpu/float_gemm.h).
bool dense_applies(const at::Tensor& x, const at::Tensor& w);
// b and b_side may be undefined (no bias).
at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& w_side, const at::Tensor& b,
                 const at::Tensor& b_side);

// out = a · b (+ bias in every row) for a: [N, K], b: [K, M] (either may be a
// transposed view), out: [N, M] with rows of unit stride; returns out. On a
// CPU the bias rows are written first and the product added to them, float32
// through oneDNN's or MKL's sgemm where one is loaded (cpu/float_gemm.h);
// elsewhere LibTorch's mm/addmm.
at::Tensor product_into(at::Tensor out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias);

// g = beta · g + aᵀ · c for a: [N, M], c: [N, K] of one dtype into g: [M, K]
// (beta 1: added into g; beta 0: g overwritten, its old values never read).
// Into a float32 g on a CPU (rows of unit stride): one oneDNN product of
// bf16 or float32 a and c, accumulated in float32, where oneDNN is loaded;
// otherwise with a and c in g's dtype LibTorch's addmm_; bf16 into a float32
// g on a GPU (all contiguous), one cuBLAS product accumulated in float32;
// otherwise a product in a's dtype, widened and added.
void add_at_b(at::Tensor& g, const at::Tensor& a, const at::Tensor& c, float beta = 1);

#ifdef NMT_WITH_CUDA
// add_at_b for bf16 a and c on a GPU (cuBLAS, float32 output), cuda/add_at_b_cuda.cpp.
void add_at_b_bf16_cuda(at::Tensor& g, const at::Tensor& a, const at::Tensor& c, float beta);
#endif

}  // namespace nmt::ops
