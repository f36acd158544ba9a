// LibTorch glue for the CPU kernels: tensor checks, parameter structs and the
// autograd wiring. The kernels themselves (naive_cpu.cpp, flash_cpu.cpp) never
// see a tensor.
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

#include "ops/attention/attention.h"
#include "ops/attention/attention_glue.h"
#include "ops/attention/cpu/attention_cpu.h"

namespace nmt::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using glue::fill_common;
using glue::last_dim_contiguous;

enum class Kernel { kNaive, kFlash };

// Runs the forward kernel. Returns {o, lse, probs}; probs only for naive.
template <typename T>
tensor_list run_forward(Kernel kernel, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const at::Tensor& lengths, double scale,
                        bool causal) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3);
  at::Tensor o = at::empty({B, H, Tq, D}, q.options());
  at::Tensor lse = at::empty({B, H, Tq}, q.options());
  at::Tensor probs;
  AttentionForwardParams<T> p{};
  fill_common(p, q, k, v, lengths, scale, causal);
  p.q = q.data_ptr<T>(), p.k = k.data_ptr<T>(), p.v = v.data_ptr<T>();
  p.o = o.data_ptr<T>(), p.lse = lse.data_ptr<T>();
  if (kernel == Kernel::kNaive) {
    probs = at::empty({B, H, Tq, Tk}, q.options());
    p.probs = probs.data_ptr<T>();
    cpu::naive_attention_forward<T>(p);
  } else {
    cpu::flash_attention_forward<T>(p);
  }
  return {o, lse, probs};
}

// Returns {dq, dk, dv}.
template <typename T>
tensor_list run_backward(Kernel kernel, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v, const at::Tensor& o, const at::Tensor& lse,
                         const at::Tensor& probs, const at::Tensor& d_o, const at::Tensor& lengths,
                         double scale, bool causal) {
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = at::empty(k.sizes(), k.options());
  at::Tensor dv = at::empty(v.sizes(), v.options());
  AttentionBackwardParams<T> p{};
  fill_common(p, q, k, v, lengths, scale, causal);
  p.q = q.data_ptr<T>(), p.k = k.data_ptr<T>(), p.v = v.data_ptr<T>();
  p.d_o = d_o.data_ptr<T>();
  p.dq = dq.data_ptr<T>(), p.dk = dk.data_ptr<T>(), p.dv = dv.data_ptr<T>();
  if (kernel == Kernel::kNaive) {
    p.probs = probs.data_ptr<T>();
    cpu::naive_attention_backward<T>(p);
  } else {
    p.o = o.data_ptr<T>(), p.lse = lse.data_ptr<T>();
    cpu::flash_attention_backward<T>(p);
  }
  return {dq, dk, dv};
}

template <typename Fn>
auto dispatch_float_double(at::ScalarType type, const char* who, Fn&& fn) {
  switch (type) {
    case at::kFloat: return fn(float{});
    case at::kDouble: return fn(double{});
    default: TORCH_CHECK(false, who, ": CPU kernels support float32 and float64, got ", type);
  }
}

// One autograd Function for both kernels; they differ in what the backward
// needs: naive keeps P [B,H,Tq,Tk], flash keeps only O and the logsumexp.
template <Kernel kKernel>
struct CpuAttentionFunction : public torch::autograd::Function<CpuAttentionFunction<kKernel>> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor q, at::Tensor k, at::Tensor v,
                            at::Tensor key_lengths, bool causal, double scale) {
    q = last_dim_contiguous(q), k = last_dim_contiguous(k), v = last_dim_contiguous(v);
    const at::Tensor lengths = glue::lengths_on(key_lengths, at::kCPU);
    const tensor_list out = dispatch_float_double(q.scalar_type(), "attention", [&](auto zero) {
      return run_forward<decltype(zero)>(kKernel, q, k, v, lengths, scale, causal);
    });
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    if (kKernel == Kernel::kNaive)
      ctx->save_for_backward({q, k, v, out[2], lengths});
    else
      ctx->save_for_backward({q, k, v, out[0], out[1], lengths});
    return out[0];
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const bool causal = ctx->saved_data["causal"].toBool();
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor d_o = grad_outputs[0].contiguous();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    at::Tensor o, lse, probs, lengths;
    if (kKernel == Kernel::kNaive) {
      probs = saved[3], lengths = saved[4];
    } else {
      o = saved[3], lse = saved[4], lengths = saved[5];
    }
    const tensor_list grads =
        dispatch_float_double(q.scalar_type(), "attention backward", [&](auto zero) {
          return run_backward<decltype(zero)>(kKernel, q, k, v, o, lse, probs, d_o, lengths,
                                              scale, causal);
        });
    return {grads[0], grads[1], grads[2], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor attention_naive_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& options) {
  return CpuAttentionFunction<Kernel::kNaive>::apply(q, k, v, glue::lengths_argument(options.key_lengths), options.causal,
                                                     glue::resolve_scale(q, options.scale));
}

at::Tensor attention_flash_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& options) {
  return CpuAttentionFunction<Kernel::kFlash>::apply(q, k, v, glue::lengths_argument(options.key_lengths), options.causal,
                                                     glue::resolve_scale(q, options.scale));
}

}  // namespace nmt::ops
