// Dispatch and autograd wiring of the fused residual add + LayerNorm.
#include "ops/layer_norm/add_layer_norm.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops/layer_norm/cpu/add_layer_norm_cpu.h"
#include "ops/linear/dense.h"
#include "ops/op_glue.h"
#ifdef NMT_WITH_CUDA
#include "ops/layer_norm/cuda/add_layer_norm_kernel.h"
#endif

namespace nmt::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename T, typename U>
void run_forward(const at::Tensor& x, const at::Tensor& y, const at::Tensor& y_bias, const at::Tensor& gamma,
                 const at::Tensor& beta, double eps, const Dropout& d, at::Tensor& sum,
                 at::Tensor& norm, at::Tensor& mean, at::Tensor& rstd) {
  cpu::AddLayerNormForwardParams<T, U> p{};
  p.x = x.data_ptr<T>();
  p.y = y.defined() ? glue::data<U>(y) : nullptr;
  p.y_bias = y_bias.defined() ? y_bias.data_ptr<T>() : nullptr;
  p.gamma = gamma.data_ptr<T>();
  p.beta = beta.data_ptr<T>();
  p.s = sum.defined() ? sum.data_ptr<T>() : nullptr;
  p.n = glue::data<U>(norm);
  p.mean = mean.data_ptr<T>();
  p.rstd = rstd.data_ptr<T>();
  p.rows = x.numel() / x.size(-1);
  p.channels = x.size(-1);
  p.positions = x.size(1);
  p.eps = eps;
  p.dropout = d.stream();
#ifdef NMT_WITH_CUDA
  if constexpr (std::is_same_v<T, float>) {
    if (x.is_cuda()) {
      TORCH_CHECK(p.dropout.row_starts == nullptr, "add_layer_norm: packed rows' dropout is the CPU kernels'");
      TORCH_CHECK(p.y_bias == nullptr, "add_layer_norm: y's bias is the CPU kernels'");
      return glue::launch_cuda(x, "add_layer_norm", [&](auto stream) { return cuda::add_layer_norm_forward(p, stream); });
    }
  }
#endif
  cpu::add_layer_norm_forward(p);
}

template <typename T, typename U>
void run_backward(const at::Tensor& s, const at::Tensor& mean, const at::Tensor& rstd,
                  const at::Tensor& gamma, const at::Tensor& dn, const at::Tensor& ds,
                  const Dropout& d, at::Tensor& dx, at::Tensor& dy, at::Tensor& dgamma,
                  at::Tensor& dbeta, at::Tensor& dy_bias) {
  cpu::AddLayerNormBackwardParams<T, U> p{};
  p.s = s.data_ptr<T>();
  p.mean = mean.data_ptr<T>();
  p.rstd = rstd.data_ptr<T>();
  p.gamma = gamma.data_ptr<T>();
  p.dn = glue::data<U>(dn);
  p.ds = ds.defined() ? ds.data_ptr<T>() : nullptr;
  p.dx = dx.data_ptr<T>();
  p.dy = dy.defined() ? glue::data<U>(dy) : nullptr;
  p.dgamma = dgamma.data_ptr<T>();
  p.dbeta = dbeta.data_ptr<T>();
  p.dy_bias = dy_bias.defined() ? dy_bias.data_ptr<T>() : nullptr;
  p.rows = s.numel() / s.size(-1);
  p.channels = s.size(-1);
  p.positions = s.size(1);
  p.dropout = d.stream();
#ifdef NMT_WITH_CUDA
  if constexpr (std::is_same_v<T, float>) {
    if (s.is_cuda()) {
      TORCH_CHECK(p.dy_bias == nullptr, "add_layer_norm: y's bias is the CPU kernels'");
      const at::Tensor scratch =
          at::empty({cuda::add_layer_norm_backward_scratch_floats(p.rows, p.channels)}, s.options());
      return glue::launch_cuda(s, "add_layer_norm backward", [&](auto stream) {
        return cuda::add_layer_norm_backward(p, scratch.data_ptr<float>(), stream);
      });
    }
  }
#endif
  cpu::add_layer_norm_backward(p);
}

struct AddLayerNormFunction : public torch::autograd::Function<AddLayerNormFunction> {
  // y, y_bias: empty tensors stand for "none" (1.13 rejects undefined arguments).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& y_in,
                               const at::Tensor& gamma, const at::Tensor& beta, double eps,
                               Dropout dropout, at::ScalarType norm_dtype, const at::Tensor& y_bias_in) {
    RECORD_FUNCTION("nmt::add_layer_norm", std::vector<c10::IValue>());
    const at::Tensor x = x_in.contiguous();
    const bool has_y = y_in.numel() > 0;
    const at::Tensor y = has_y ? y_in.contiguous() : at::Tensor();
    const at::ScalarType side = has_y ? y.scalar_type() : norm_dtype;
    TORCH_CHECK(side == norm_dtype, "add_layer_norm: y and norm dtypes differ");
    const bool has_bias = y_bias_in.numel() > 0;
    TORCH_CHECK(!has_bias || (y_bias_in.dim() == 1 && y_bias_in.size(0) == x.size(-1) &&
                              y_bias_in.scalar_type() == x.scalar_type()),
                "add_layer_norm: y_bias must be [C] in x's dtype");  // (add_layer_norm checked there is a y)
    const at::Tensor y_bias = has_bias ? y_bias_in.contiguous() : at::Tensor();
    at::Tensor sum = has_y ? at::empty_like(x) : at::Tensor();
    at::Tensor norm = empty_with_row_room(x.sizes(), x.options().dtype(norm_dtype));  // dense() reads it
    at::Tensor mean = at::empty({x.numel() / x.size(-1)}, x.options());
    at::Tensor rstd = at::empty_like(mean);
    glue::dispatch_stream_side("add_layer_norm", x.scalar_type(), side, [&](auto t, auto u) {
      run_forward<decltype(t), decltype(u)>(x, y, y_bias, gamma.contiguous(), beta.contiguous(), eps,
                                            dropout, sum, norm, mean, rstd);
    });
    ctx->save_for_backward({has_y ? sum : x, mean, rstd, gamma});
    ctx->saved_data["has_y"] = has_y;
    ctx->saved_data["has_bias"] = has_bias;
    glue::save_dropout(ctx, dropout);
    ctx->saved_data["side"] = static_cast<int64_t>(side);
    if (!has_y) return {norm};
    return {sum, norm};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &s = saved[0], &mean = saved[1], &rstd = saved[2], &gamma = saved[3];
    const bool has_y = ctx->saved_data["has_y"].toBool();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const auto side = static_cast<at::ScalarType>(ctx->saved_data["side"].toInt());
    const Dropout dropout = glue::load_dropout(ctx);
    const at::Tensor ds = has_y && grads[0].defined() ? grads[0].contiguous() : at::Tensor();
    at::Tensor dn = grads[has_y ? 1 : 0];
    dn = dn.defined() ? dn.contiguous() : at::zeros(s.sizes(), s.options().dtype(side));
    at::Tensor dx = at::empty_like(s);
    at::Tensor dy = has_y ? empty_with_row_room(s.sizes(), s.options().dtype(side)) : at::Tensor();
    at::Tensor dgamma = at::empty_like(gamma), dbeta = at::empty_like(gamma);
    at::Tensor dy_bias = has_bias ? at::empty({s.size(-1)}, s.options()) : at::Tensor();
    glue::dispatch_stream_side("add_layer_norm", s.scalar_type(), side, [&](auto t, auto u) {
      run_backward<decltype(t), decltype(u)>(s, mean, rstd, gamma.contiguous(), dn, ds, dropout, dx,
                                             dy, dgamma, dbeta, dy_bias);
    });
    return {dx, has_y ? dy : at::Tensor(), dgamma, dbeta, at::Tensor(), at::Tensor(), at::Tensor(), dy_bias};
  }
};

}  // namespace

AddLayerNormOutput add_layer_norm_reference(const at::Tensor& x, const at::Tensor& y,
                                            const at::Tensor& gamma, const at::Tensor& beta,
                                            double eps, const Dropout& dropout,
                                            at::ScalarType norm_dtype, const at::Tensor& y_bias) {
  AddLayerNormOutput out;
  at::Tensor s = x;
  if (y.defined()) {
    at::Tensor y_stream = y.to(x.scalar_type());
    if (y_bias.defined()) y_stream = y_stream + y_bias;
    s = x + (dropout.active()
                 ? y_stream * dropout_multipliers(dropout, x.size(0), x.size(1), x.size(2), x.options())
                 : y_stream);
    out.sum = s;
  }
  out.norm = at::layer_norm(s, {x.size(-1)}, gamma, beta, eps).to(norm_dtype);
  return out;
}

AddLayerNormOutput add_layer_norm(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gamma,
                                  const at::Tensor& beta, double eps, const Dropout& dropout,
                                  at::ScalarType norm_dtype, const at::Tensor& y_bias) {
  TORCH_CHECK(x.dim() == 3, "add_layer_norm: x must be [B, T, C]");
  TORCH_CHECK(!y_bias.defined() || y.defined(), "add_layer_norm: y_bias without a y");
  if (y_bias.defined() && !x.is_cpu()) {
    // Off the CPU the bias is added first (the GPU kernels take none): y
    // rounded to its dtype after it, as a product with the bias would be.
    return add_layer_norm(x, (y + y_bias).to(y.scalar_type()), gamma, beta, eps, dropout, norm_dtype);
  }
  // On a GPU: the fused kernels for a float32 stream with a float32 or bf16 side.
  const bool fused_gpu = glue::fused_on_cuda(x) && x.scalar_type() == at::kFloat &&
                         (norm_dtype == at::kFloat || norm_dtype == at::kBFloat16);
  if (!x.is_cpu() && !fused_gpu) return add_layer_norm_reference(x, y, gamma, beta, eps, dropout, norm_dtype);
  const variable_list out = AddLayerNormFunction::apply(
      x, y.defined() ? y : at::empty({0}, x.options().dtype(norm_dtype)), gamma, beta, eps, dropout,
      norm_dtype, y_bias.defined() ? y_bias : at::empty({0}, x.options()));
  if (out.size() == 1) return {at::Tensor(), out[0]};
  return {out[0], out[1]};
}

}  // namespace nmt::ops
