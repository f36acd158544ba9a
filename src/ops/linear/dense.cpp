#include "ops/linear/dense.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops/op_glue.h"

namespace nmt::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A gradient buffer the backward may add into: float32, contiguous, on x's device.
bool addable(const at::Tensor& grad, const at::Tensor& x) {
  return grad.defined() && grad.scalar_type() == at::kFloat && grad.is_contiguous() && grad.device() == x.device();
}

// bf16 rows on the CPU rounded up to kBf16RowQuantum (zero rows appended).
// Not on a GPU: there the copies cost more host time than the shapes they
// save (configs/real.yaml on an H100: bf16 252,261 tokens/s without them,
// 221,326 with them and the packed attention, docs/bench/gpu_h100.md).
at::Tensor padded(const at::Tensor& x) {
  const int64_t n = x.size(0), extra = (kBf16RowQuantum - n % kBf16RowQuantum) % kBf16RowQuantum;
  return x.scalar_type() != at::kBFloat16 || extra == 0 || x.is_cuda() ? x : at::constant_pad_nd(x, {0, 0, 0, extra});
}

struct DenseFunction : public torch::autograd::Function<DenseFunction> {
  // b and b_side: empty tensors stand for "no bias" (1.13 rejects undefined arguments).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                               const at::Tensor& w_side, const at::Tensor& b, const at::Tensor& b_side) {
    RECORD_FUNCTION("nmt::dense", std::vector<c10::IValue>());
    const bool has_bias = b.numel() > 0;
    const at::Tensor xp = padded(x);  // [N', in]
    const at::Tensor y = has_bias ? at::addmm(b_side, xp, w_side) : at::mm(xp, w_side);  // [N', out]
    ctx->save_for_backward({xp, w_side});
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["rows"] = x.size(0);
    // The flat gradient buffer's view (the same tensor every step).
    const at::Tensor wgrad = w.grad();
    if (addable(wgrad, x) && wgrad.sizes() == w.sizes()) ctx->saved_data["wgrad"] = wgrad;
    return {y.narrow(0, 0, x.size(0))};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w_side = saved[1];  // x: [N', in]
    const int64_t rows = ctx->saved_data["rows"].toInt();
    const at::Tensor dy = padded(grads[0].contiguous());  // [N', out], zero rows below N
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = at::mm(dy, w_side.t()).narrow(0, 0, rows);  // [N, in]
    if (ctx->needs_input_grad(1)) {
      if (ctx->saved_data.count("wgrad") != 0) {
        at::Tensor wgrad = ctx->saved_data["wgrad"].toTensor();
        add_at_b(wgrad, x, dy);  // autograd adds nothing more: dw stays undefined
      } else {
        dw = at::mm(x.t(), dy).to(at::kFloat);
      }
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(3))
      db = at::sum(dy.narrow(0, 0, rows), {0}, /*keepdim=*/false, at::kFloat);
    return {dx, dw, at::Tensor(), db, at::Tensor()};
  }
};

}  // namespace

bool dense_applies(const at::Tensor& x, const at::Tensor& w) {
  return glue::fused_on_cuda(x) && at::GradMode::is_enabled() && w.scalar_type() == at::kFloat &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16) && x.device() == w.device();
}

at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& w_side, const at::Tensor& b,
                 const at::Tensor& b_side) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(0) && w_side.sizes() == w.sizes() &&
                  x.scalar_type() == w_side.scalar_type(),
              "dense: expected x [N, in] and w, w_side [in, out] with x's dtype on the side; got ", x.sizes(), " ",
              x.scalar_type(), ", ", w.sizes(), ", ", w_side.sizes(), " ", w_side.scalar_type());
  const at::Tensor none = at::empty({0}, w.options());
  return DenseFunction::apply(x.contiguous(), w, w_side, b.defined() ? b : none,
                              b.defined() ? b_side : none.to(x.scalar_type()))[0];
}

void add_at_b(at::Tensor& g, const at::Tensor& a, const at::Tensor& c) {
  TORCH_CHECK(a.dim() == 2 && c.dim() == 2 && a.size(0) == c.size(0) && g.size(0) == a.size(1) &&
                  g.size(1) == c.size(1) && a.scalar_type() == c.scalar_type(),
              "add_at_b: expected g [M, K], a [N, M], c [N, K] (a and c of one dtype); got ", g.sizes(), ", ",
              a.sizes(), ", ", c.sizes());
  if (a.scalar_type() == g.scalar_type()) {
    g.addmm_(a.t(), c);
    return;
  }
#ifdef NMT_WITH_CUDA
  if (g.is_cuda() && g.scalar_type() == at::kFloat && a.scalar_type() == at::kBFloat16)
    return add_at_b_bf16_cuda(g, a, c);
#endif
  g.add_(at::mm(a.t(), c).to(g.scalar_type()));
}

}  // namespace nmt::ops
