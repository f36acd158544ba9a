// LibTorch glue for the CUDA kernels (compiled only against a LibTorch with
// CUDA): tensor checks, the current stream, scratch buffers and autograd.
// The kernels (naive_attention.cu, flash_attention.cu, flash_attention_bf16.cu)
// never see a tensor.
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

// The float32 flash backward: q, k, v, o and dO float32 (any strides with a
// contiguous last dim for q, k, v; o and dO are made contiguous), lse float32
// [B, H, Tq]. Returns dq, dk, dv, float32 and contiguous.
std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_backward_f32(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o,
    const at::Tensor& lse, const at::Tensor& lengths, const at::Tensor& grad_o, double scale,
    bool causal) {
  const at::Tensor d_o = grad_o.contiguous();
  const at::Tensor o_c = o.contiguous();
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = at::empty(k.sizes(), k.options());
  at::Tensor dv = at::empty(v.sizes(), v.options());
  AttentionBackwardParams<float> p{};
  glue::fill_common(p, q, k, v, lengths, scale, causal);
  p.q = q.data_ptr<float>(), p.k = k.data_ptr<float>(), p.v = v.data_ptr<float>();
  p.o = o_c.data_ptr<float>(), p.lse = lse.data_ptr<float>();
  p.d_o = d_o.data_ptr<float>();
  p.dq = dq.data_ptr<float>(), p.dk = dk.data_ptr<float>(), p.dv = dv.data_ptr<float>();
  at::Tensor delta = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());  // D: [B,H,Tq]
  // dq is float32 already: accumulate into it directly, no extra buffer.
  check_cuda(cuda::flash_attention_backward(p, delta.data_ptr<float>(), nullptr,
                                            at::cuda::getCurrentCUDAStream()),
             "flash attention backward");
  return {dq, dk, dv};
}

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
    const double scale = ctx->saved_data["scale"].toDouble();
    const bool causal = ctx->saved_data["causal"].toBool();
    const at::Tensor& lengths = saved.back();
    if (kKernel == Kernel::kFlash) {
      auto [dq, dk, dv] = flash_backward_f32(q, k, v, saved[3], saved[4], lengths,
                                             grad_outputs[0], scale, causal);
      return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor()};
    }
    const at::Tensor d_o = grad_outputs[0].contiguous();
    at::Tensor dq = at::empty(q.sizes(), q.options());
    at::Tensor dk = at::empty(k.sizes(), k.options());
    at::Tensor dv = at::empty(v.sizes(), v.options());
    AttentionBackwardParams<float> p{};
    glue::fill_common(p, q, k, v, lengths, scale, causal);
    p.q = q.data_ptr<float>(), p.k = k.data_ptr<float>(), p.v = v.data_ptr<float>();
    p.d_o = d_o.data_ptr<float>();
    p.dq = dq.data_ptr<float>(), p.dk = dk.data_ptr<float>(), p.dv = dv.data_ptr<float>();
    p.probs = saved[3].data_ptr<float>();
    at::Tensor ds = at::empty_like(saved[3]);  // dS: [B, H, Tq, Tk]
    check_cuda(cuda::naive_attention_backward(p, ds.data_ptr<float>(), at::cuda::getCurrentCUDAStream()),
               "naive attention backward");
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// bf16 q, k, v on tensor cores (flash_attention_bf16.cu): o in bf16, lse in
// float32. The backward runs on tensor cores too (flash_attention_bf16_bwd.cu)
// where it applies; otherwise (dO rows the kernel cannot read, which
// .contiguous() rules out, or a GPU it refuses) it runs the float32 kernel on
// the widened q, k, v, o and dO (the o the forward actually produced, so
// delta = rowsum(dO * O) matches it) and narrows the gradients.
struct CudaFlashBf16Function : public torch::autograd::Function<CudaFlashBf16Function> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor q, at::Tensor k, at::Tensor v,
                            at::Tensor key_lengths, bool causal, double scale) {
    const c10::cuda::CUDAGuard guard(q.device());
    const at::Tensor lengths = glue::lengths_on(key_lengths, q.device());
    AttentionForwardParams<bf16, float> p = bf16_params(q, k, v, lengths, scale, causal);
    const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
    at::Tensor o = at::empty({B, H, Tq, D}, q.options());
    at::Tensor lse = at::empty({B, H, Tq}, q.options().dtype(at::kFloat));
    p.o = reinterpret_cast<bf16*>(o.data_ptr<at::BFloat16>());
    p.lse = lse.data_ptr<float>();
    check_cuda(cuda::flash_attention_forward_bf16(p, at::cuda::getCurrentCUDAStream()),
               "flash attention forward (bf16)");
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    ctx->save_for_backward({q, k, v, o, lse, lengths});
    return o;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &o = saved[3], &lse = saved[4];
    const at::Tensor& lengths = saved[5];
    const c10::cuda::CUDAGuard guard(q.device());
    const double scale = ctx->saved_data["scale"].toDouble();
    const bool causal = ctx->saved_data["causal"].toBool();
    const at::Tensor d_o = grad_outputs[0].to(at::kBFloat16).contiguous();
    at::Tensor dq = at::empty(q.sizes(), q.options());
    at::Tensor dk = at::empty(k.sizes(), k.options());
    at::Tensor dv = at::empty(v.sizes(), v.options());
    AttentionBackwardParams<bf16, float> p{};
    glue::fill_common(p, q, k, v, lengths, scale, causal);  // o, dO, dq, dk, dv: contiguous
    const auto ptr = [](const at::Tensor& t) { return reinterpret_cast<bf16*>(t.data_ptr<at::BFloat16>()); };
    p.q = ptr(q), p.k = ptr(k), p.v = ptr(v), p.o = ptr(o), p.d_o = ptr(d_o);
    p.lse = lse.data_ptr<float>();
    p.dq = ptr(dq), p.dk = ptr(dk), p.dv = ptr(dv);
    if (cuda::flash_attention_backward_bf16_supported(p)) {
      at::Tensor delta = at::empty({q.size(0), q.size(1), q.size(2)}, lse.options());  // [B, H, Tq]
      at::Tensor dq_accum;  // [B, H, Tq, D] float32, for dQ by atomics
      if (cuda::bf16_backward_uses_atomic_dq(k.size(2), at::globalContext().deterministicAlgorithms()))
        dq_accum = at::empty(q.sizes(), lse.options());
      check_cuda(cuda::flash_attention_backward_bf16(p, delta.data_ptr<float>(),
                                                     dq_accum.defined() ? dq_accum.data_ptr<float>() : nullptr,
                                                     at::cuda::getCurrentCUDAStream()),
                 "flash attention backward (bf16)");
      return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor()};
    }
    const auto f32 = [](const at::Tensor& t) { return t.to(at::kFloat); };
    auto [dq32, dk32, dv32] = flash_backward_f32(f32(q), f32(k), f32(v), f32(o), lse, lengths,
                                                 f32(d_o), scale, causal);
    return {dq32.to(at::kBFloat16), dk32.to(at::kBFloat16), dv32.to(at::kBFloat16), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }

  // The kernel's parameters for bf16 q, k, v (last dim contiguous), lengths
  // on the device (or undefined); o and lse left for the caller.
  static AttentionForwardParams<bf16, float> bf16_params(const at::Tensor& q, const at::Tensor& k,
                                                         const at::Tensor& v, const at::Tensor& lengths,
                                                         double scale, bool causal) {
    AttentionForwardParams<bf16, float> p{};
    glue::fill_common(p, q, k, v, lengths, scale, causal);
    p.q = reinterpret_cast<const bf16*>(q.data_ptr<at::BFloat16>());
    p.k = reinterpret_cast<const bf16*>(k.data_ptr<at::BFloat16>());
    p.v = reinterpret_cast<const bf16*>(v.data_ptr<at::BFloat16>());
    return p;
  }
};

}  // namespace

namespace {

// float32 inputs run the float32 kernels. bf16 inputs, which bf16 training
// gives the attention (its projections run in bf16), run the tensor-core
// flash forward where it applies (sm_80+, head dims 8..128 in multiples of
// 8, aligned rows). Everything else in bf16 or half (the naive backend, other
// shapes) is widened on the way in and the output narrowed on the way out;
// autograd casts the gradients back the same way.
template <Kernel kKernel>
at::Tensor run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionOptions& options) {
  const double scale = glue::resolve_scale(q, options.scale);
  const at::Tensor lengths = glue::lengths_argument(options.key_lengths);
  const at::ScalarType dtype = q.scalar_type();
  if (kKernel == Kernel::kFlash && dtype == at::kBFloat16 && k.scalar_type() == dtype &&
      v.scalar_type() == dtype) {
    const c10::cuda::CUDAGuard guard(q.device());
    const at::Tensor qc = glue::last_dim_contiguous(q), kc = glue::last_dim_contiguous(k),
                     vc = glue::last_dim_contiguous(v);
    if (cuda::flash_attention_forward_bf16_supported(
            CudaFlashBf16Function::bf16_params(qc, kc, vc, at::Tensor(), scale, options.causal)))
      return CudaFlashBf16Function::apply(qc, kc, vc, lengths, options.causal, scale);
  }
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
