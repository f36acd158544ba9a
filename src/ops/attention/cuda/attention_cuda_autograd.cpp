// LibTorch glue for the CUDA kernels (compiled only against a LibTorch with
// CUDA): tensor checks, the current stream, scratch buffers and autograd.
// The kernels (naive_attention.cu, flash_attention.cu) never see a tensor.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops/attention/attention.h"
#include "ops/attention/attention_glue.h"
#include "ops/attention/cuda/attention_cuda.h"

namespace nmt::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

void check_cuda(int err, const char* what) {
  TORCH_CHECK(err == 0, what, " failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
}

enum class Kernel { kNaive, kFlash };

template <Kernel kKernel>
struct CudaAttentionFunction : public torch::autograd::Function<CudaAttentionFunction<kKernel>> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor q, at::Tensor k, at::Tensor v,
                            at::Tensor key_lengths, bool causal, double scale) {
    TORCH_CHECK(q.scalar_type() == at::kFloat,
                "CUDA attention kernels support float32 (bf16 and half are widened), got ", q.scalar_type());
    const c10::cuda::CUDAGuard guard(q.device());
    q = glue::last_dim_contiguous(q), k = glue::last_dim_contiguous(k);
    v = glue::last_dim_contiguous(v);
    const at::Tensor lengths = glue::lengths_on(key_lengths, q.device());
    const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3);
    at::Tensor o = at::empty({B, H, Tq, D}, q.options());
    at::Tensor lse = at::empty({B, H, Tq}, q.options());
    AttentionForwardParams<float> p{};
    glue::fill_common(p, q, k, v, lengths, scale, causal);
    p.q = q.data_ptr<float>(), p.k = k.data_ptr<float>(), p.v = v.data_ptr<float>();
    p.o = o.data_ptr<float>(), p.lse = lse.data_ptr<float>();
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    if (kKernel == Kernel::kNaive) {
      at::Tensor probs = at::empty({B, H, Tq, Tk}, q.options());
      p.probs = probs.data_ptr<float>();
      check_cuda(cuda::naive_attention_forward(p, stream), "naive attention forward");
      ctx->save_for_backward({q, k, v, probs, lengths});
    } else {
      check_cuda(cuda::flash_attention_forward(p, stream), "flash attention forward");
      ctx->save_for_backward({q, k, v, o, lse, lengths});
    }
    return o;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    const c10::cuda::CUDAGuard guard(q.device());
    const at::Tensor d_o = grad_outputs[0].contiguous();
    at::Tensor dq = at::empty(q.sizes(), q.options());
    at::Tensor dk = at::empty(k.sizes(), k.options());
    at::Tensor dv = at::empty(v.sizes(), v.options());
    AttentionBackwardParams<float> p{};
    const at::Tensor& lengths = saved.back();
    glue::fill_common(p, q, k, v, lengths, ctx->saved_data["scale"].toDouble(),
                      ctx->saved_data["causal"].toBool());
    p.q = q.data_ptr<float>(), p.k = k.data_ptr<float>(), p.v = v.data_ptr<float>();
    p.d_o = d_o.data_ptr<float>();
    p.dq = dq.data_ptr<float>(), p.dk = dk.data_ptr<float>(), p.dv = dv.data_ptr<float>();
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (kKernel == Kernel::kNaive) {
      p.probs = saved[3].data_ptr<float>();
      at::Tensor ds = at::empty_like(saved[3]);  // dS: [B, H, Tq, Tk]
      check_cuda(cuda::naive_attention_backward(p, ds.data_ptr<float>(), stream),
                 "naive attention backward");
    } else {
      p.o = saved[3].data_ptr<float>(), p.lse = saved[4].data_ptr<float>();
      at::Tensor delta = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());  // D: [B,H,Tq]
      // dq is float32 already: accumulate into it directly, no extra buffer.
      check_cuda(cuda::flash_attention_backward(p, delta.data_ptr<float>(), nullptr, stream),
                 "flash attention backward");
    }
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

namespace {

// The kernels compute in float32. bf16 (or half) inputs, which bf16
// training gives the attention (its projections run in bf16), are widened
// on the way in and the output narrowed on the way out; autograd casts the
// gradients back the same way. Correct, with float32 accumulation, but
// without tensor cores: bf16 kernels of their own would be faster.
template <Kernel kKernel>
at::Tensor run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionOptions& options) {
  const double scale = glue::resolve_scale(q, options.scale);
  const at::Tensor lengths = glue::lengths_argument(options.key_lengths);
  const at::ScalarType dtype = q.scalar_type();
  if (dtype != at::kBFloat16 && dtype != at::kHalf)
    return CudaAttentionFunction<kKernel>::apply(q, k, v, lengths, options.causal, scale);
  return CudaAttentionFunction<kKernel>::apply(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), lengths,
                                               options.causal, scale)
      .to(dtype);
}

}  // namespace

at::Tensor attention_naive_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const AttentionOptions& options) {
  return run<Kernel::kNaive>(q, k, v, options);
}

at::Tensor attention_flash_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const AttentionOptions& options) {
  return run<Kernel::kFlash>(q, k, v, options);
}

}  // namespace nmt::ops
