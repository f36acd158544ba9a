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

enum class CudaKernel { kNaive, kFlash };

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

template <CudaKernel kKernel>
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
    if (kKernel == CudaKernel::kNaive) {
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
    if (kKernel == CudaKernel::kFlash) {
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


// The packed form in bf16 (attention.h: packed_flash_attention_cuda): q, k
// and v are [B, H, T, D] views of the projections' rows ([B, T, 3C] for
// self-attention; [B, Tq, C] and [B, Tk, 2C] for cross-attention), o is
// written as [B, Tq, C] rows, dO read where the next layer's gradient lies,
// and the gradients written into one buffer per input: no copies to split or
// merge heads, and none of the autograd nodes of the views.
struct PackedFlashBf16Function : public torch::autograd::Function<PackedFlashBf16Function> {
  // kv_src: an empty tensor for self-attention (1.13 rejects undefined arguments).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q_src, const at::Tensor& kv_src, int64_t heads,
                            const at::Tensor& key_lengths, bool causal, double scale) {
    const c10::cuda::CUDAGuard guard(q_src.device());
    const Views v = views(q_src, kv_src, heads);
    const at::Tensor lengths = glue::lengths_on(key_lengths, q_src.device());
    const int64_t B = v.q.size(0), H = heads, Tq = v.q.size(2), C = H * v.q.size(3);
    at::Tensor o = at::empty({B, Tq, C}, q_src.options());
    at::Tensor lse = at::empty({B, H, Tq}, q_src.options().dtype(at::kFloat));
    AttentionForwardParams<bf16, float> p = forward_params(v, lengths, scale, causal, o);
    p.lse = lse.data_ptr<float>();
    check_cuda(cuda::flash_attention_forward_bf16(p, at::cuda::getCurrentCUDAStream()),
               "flash attention forward (bf16, packed)");
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["heads"] = heads;
    ctx->save_for_backward({q_src, kv_src, o, lse, lengths.defined() ? lengths : key_lengths});
    return o;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q_src = saved[0], &kv_src = saved[1], &o = saved[2], &lse = saved[3];
    const at::Tensor lengths = saved[4].numel() > 0 ? saved[4] : at::Tensor();
    const c10::cuda::CUDAGuard guard(q_src.device());
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const double scale = ctx->saved_data["scale"].toDouble();
    const bool causal = ctx->saved_data["causal"].toBool();
    const Views v = views(q_src, kv_src, heads);
    const at::Tensor d_o = grad_outputs[0].to(at::kBFloat16).contiguous();  // [B, Tq, C]
    // One gradient buffer per input, the heads where the views put them.
    at::Tensor d_q_src = at::empty_like(q_src, at::MemoryFormat::Contiguous);
    at::Tensor d_kv_src = kv_src.numel() > 0 ? at::empty_like(kv_src, at::MemoryFormat::Contiguous) : at::Tensor();
    const Views dv = views(d_q_src, d_kv_src.defined() ? d_kv_src : at::empty({0}, kv_src.options()), heads);
    AttentionBackwardParams<bf16, float> p{};
    glue::fill_common(p, v.q, v.k, v.v, lengths, scale, causal);
    const auto ptr = [](const at::Tensor& t) { return reinterpret_cast<bf16*>(t.data_ptr<at::BFloat16>()); };
    const at::Tensor o4 = head_view(o, 0, heads, o.size(2)), do4 = head_view(d_o, 0, heads, d_o.size(2));
    p.q = ptr(v.q), p.k = ptr(v.k), p.v = ptr(v.v), p.o = ptr(o4), p.d_o = ptr(do4);
    p.lse = lse.data_ptr<float>();
    p.dq = ptr(dv.q), p.dk = ptr(dv.k), p.dv = ptr(dv.v);
    glue::strides_of(o4, p.o_stride_b, p.o_stride_h, p.o_stride_t);
    glue::strides_of(do4, p.do_stride_b, p.do_stride_h, p.do_stride_t);
    glue::strides_of(dv.q, p.dq_stride_b, p.dq_stride_h, p.dq_stride_t);
    glue::strides_of(dv.k, p.dk_stride_b, p.dk_stride_h, p.dk_stride_t);
    glue::strides_of(dv.v, p.dv_stride_b, p.dv_stride_h, p.dv_stride_t);
    TORCH_CHECK(cuda::flash_attention_backward_bf16_supported(p),
                "flash attention backward (bf16, packed): the kernels do not take these gradients");
    at::Tensor delta = at::empty({p.batch, p.heads, p.q_len}, lse.options());  // [B, H, Tq]
    at::Tensor dq_accum;  // [B, H, Tq, D] float32, for dQ by atomics
    if (cuda::bf16_backward_uses_atomic_dq(p.k_len, at::globalContext().deterministicAlgorithms()))
      dq_accum = at::empty({p.batch, p.heads, p.q_len, p.head_dim}, lse.options());
    check_cuda(cuda::flash_attention_backward_bf16(p, delta.data_ptr<float>(),
                                                   dq_accum.defined() ? dq_accum.data_ptr<float>() : nullptr,
                                                   at::cuda::getCurrentCUDAStream()),
               "flash attention backward (bf16, packed)");
    return {d_q_src, d_kv_src, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }

  struct Views {
    at::Tensor q, k, v;  // [B, H, T, D] views
  };

  // [B, T, W] columns [col, col + C) as [B, H, T, D].
  static at::Tensor head_view(const at::Tensor& src, int64_t col, int64_t heads, int64_t channels) {
    return src.narrow(2, col, channels).view({src.size(0), src.size(1), heads, channels / heads}).transpose(1, 2);
  }

  static Views views(const at::Tensor& q_src, const at::Tensor& kv_src, int64_t heads) {
    if (kv_src.numel() == 0) {  // self: q_src = [B, T, 3C]
      const int64_t C = q_src.size(2) / 3;
      return {head_view(q_src, 0, heads, C), head_view(q_src, C, heads, C), head_view(q_src, 2 * C, heads, C)};
    }
    const int64_t C = q_src.size(2);
    return {head_view(q_src, 0, heads, C), head_view(kv_src, 0, heads, C), head_view(kv_src, C, heads, C)};
  }

  static AttentionForwardParams<bf16, float> forward_params(const Views& v, const at::Tensor& lengths, double scale,
                                                            bool causal, const at::Tensor& o) {
    AttentionForwardParams<bf16, float> p = CudaFlashBf16Function::bf16_params(v.q, v.k, v.v, lengths, scale, causal);
    const at::Tensor o4 = head_view(o, 0, v.q.size(1), o.size(2));
    p.o = reinterpret_cast<bf16*>(o4.data_ptr<at::BFloat16>());
    glue::strides_of(o4, p.o_stride_b, p.o_stride_h, p.o_stride_t);
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
template <CudaKernel kKernel>
at::Tensor run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionOptions& options) {
  const double scale = glue::resolve_scale(q, options.scale);
  const at::Tensor lengths = glue::lengths_argument(options.key_lengths);
  const at::ScalarType dtype = q.scalar_type();
  if (kKernel == CudaKernel::kFlash && dtype == at::kBFloat16 && k.scalar_type() == dtype &&
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
  return run<CudaKernel::kNaive>(q, k, v, options);
}

at::Tensor attention_flash_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const AttentionOptions& options) {
  return run<CudaKernel::kFlash>(q, k, v, options);
}

at::Tensor packed_flash_attention_cuda(const at::Tensor& q_src, const at::Tensor& kv_src, int64_t heads,
                                       const AttentionOptions& options) {
  const bool self = !kv_src.defined();
  const at::Tensor q = q_src.stride(2) == 1 ? q_src : q_src.contiguous();
  const at::Tensor kv = self ? at::empty({0}, q_src.options()) : kv_src.stride(2) == 1 ? kv_src : kv_src.contiguous();
  const int64_t width = self ? q.size(2) / 3 : q.size(2);
  if (q.scalar_type() != at::kBFloat16 || kv.scalar_type() != at::kBFloat16 || width % heads != 0 ||
      q.numel() == 0 || (!self && kv.numel() == 0))
    return {};
  using F = PackedFlashBf16Function;
  const F::Views v = F::views(q, kv, heads);
  const double scale = glue::resolve_scale(v.q, options.scale);
  const c10::cuda::CUDAGuard guard(q.device());
  // Whether the kernels take these views and the packed gradients (laid out
  // as the inputs; o and dO as [B, Tq, C] rows), asked with the inputs' own
  // pointers, which are at most as aligned as fresh buffers.
  AttentionForwardParams<bf16, float> fp = CudaFlashBf16Function::bf16_params(v.q, v.k, v.v, at::Tensor(), scale,
                                                                             options.causal);
  const int64_t head_dim = v.q.size(3);
  fp.o = const_cast<bf16*>(fp.q);
  fp.o_stride_b = q.size(1) * width, fp.o_stride_h = head_dim, fp.o_stride_t = width;
  if (!cuda::flash_attention_forward_bf16_supported(fp)) return {};
  AttentionBackwardParams<bf16, float> bp{};
  glue::fill_common(bp, v.q, v.k, v.v, at::Tensor(), scale, options.causal);
  bp.q = fp.q, bp.k = fp.k, bp.v = fp.v, bp.o = fp.o, bp.d_o = fp.o;
  bp.lse = reinterpret_cast<const float*>(fp.q);  // asked to be there, not read
  bp.dq = const_cast<bf16*>(fp.q), bp.dk = const_cast<bf16*>(fp.k), bp.dv = const_cast<bf16*>(fp.v);
  bp.o_stride_b = bp.do_stride_b = fp.o_stride_b;
  bp.o_stride_h = bp.do_stride_h = fp.o_stride_h;
  bp.o_stride_t = bp.do_stride_t = fp.o_stride_t;
  glue::strides_of(v.q, bp.dq_stride_b, bp.dq_stride_h, bp.dq_stride_t);
  glue::strides_of(v.k, bp.dk_stride_b, bp.dk_stride_h, bp.dk_stride_t);
  glue::strides_of(v.v, bp.dv_stride_b, bp.dv_stride_h, bp.dv_stride_t);
  if (!cuda::flash_attention_backward_bf16_supported(bp)) return {};
  return F::apply(q, kv, heads, glue::lengths_argument(options.key_lengths), options.causal, scale);
}

}  // namespace nmt::ops
