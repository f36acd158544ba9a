#include "ops/activation/bias_relu_dropout.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops/activation/cpu/bias_relu_dropout_cpu.h"
#include "ops/linear/dense.h"
#include "ops/op_glue.h"
#ifdef NMT_WITH_CUDA
#include "ops/activation/cuda/bias_relu_dropout_kernel.h"
#endif

namespace nmt::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct BiasReluDropoutFunction : public torch::autograd::Function<BiasReluDropoutFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& h_in, const at::Tensor& bias,
                               Dropout dropout) {
    RECORD_FUNCTION("nmt::bias_relu_dropout", std::vector<c10::IValue>());
    const at::Tensor h = h_in.contiguous();
    at::Tensor out = empty_like_with_row_room(h);  // dense() reads it
    glue::dispatch_stream_side("bias_relu_dropout", bias.scalar_type(), h.scalar_type(), [&](auto t, auto u) {
      using T = decltype(t);
      using U = decltype(u);
      cpu::BiasReluDropoutParams<T, U> p{};
      p.h = glue::data<U>(h);
      p.bias = bias.contiguous().data_ptr<T>();
      p.out = glue::data<U>(out);
      p.rows = h.numel() / h.size(-1);
      p.channels = h.size(-1);
      p.positions = h.size(1);
      p.dropout = dropout.stream();
#ifdef NMT_WITH_CUDA
      if constexpr (std::is_same_v<T, float>) {
        if (h.is_cuda()) {
          TORCH_CHECK(p.dropout.row_starts == nullptr, "bias_relu_dropout: packed rows' dropout is the CPU kernels'");
          return glue::launch_cuda(h, "bias_relu_dropout",
                                   [&](auto stream) { return cuda::bias_relu_dropout_forward(p, stream); });
        }
      }
#endif
      cpu::bias_relu_dropout_forward(p);
    });
    ctx->save_for_backward({out});
    ctx->saved_data["p"] = static_cast<double>(dropout.stream().p);
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor out = ctx->get_saved_variables()[0];
    const auto bias_dtype = static_cast<at::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
    const at::Tensor dout = grads[0].contiguous();
    at::Tensor dh = empty_like_with_row_room(out);
    at::Tensor dbias = at::empty({out.size(-1)}, out.options().dtype(bias_dtype));
    glue::dispatch_stream_side("bias_relu_dropout", bias_dtype, out.scalar_type(), [&](auto t, auto u) {
      using T = decltype(t);
      using U = decltype(u);
      cpu::BiasReluDropoutBackwardParams<T, U> p{};
      p.out = glue::data<U>(out);
      p.dout = glue::data<U>(dout);
      p.dh = glue::data<U>(dh);
      p.dbias = dbias.data_ptr<T>();
      p.rows = out.numel() / out.size(-1);
      p.channels = out.size(-1);
      p.p = static_cast<float>(ctx->saved_data["p"].toDouble());
#ifdef NMT_WITH_CUDA
      if constexpr (std::is_same_v<T, float>) {
        if (out.is_cuda()) {
          const at::Tensor scratch = at::empty(
              {cuda::bias_relu_dropout_backward_scratch_floats(p.rows, p.channels)}, out.options().dtype(at::kFloat));
          return glue::launch_cuda(out, "bias_relu_dropout backward", [&](auto stream) {
            return cuda::bias_relu_dropout_backward(p, scratch.data_ptr<float>(), stream);
          });
        }
      }
#endif
      cpu::bias_relu_dropout_backward(p);
    });
    return {dh, dbias, at::Tensor()};
  }
};

}  // namespace

at::Tensor bias_relu_dropout_reference(const at::Tensor& h, const at::Tensor& bias,
                                       const Dropout& dropout) {
  at::Tensor out = at::relu(h.to(bias.scalar_type()) + bias);
  if (dropout.active())
    out = out * dropout_multipliers(dropout, h.size(0), h.size(1), h.size(2), out.options());
  return out.to(h.scalar_type());
}

at::Tensor bias_relu_dropout(const at::Tensor& h, const at::Tensor& bias, const Dropout& dropout) {
  TORCH_CHECK(h.dim() == 3, "bias_relu_dropout: h must be [B, T, F]");
  // On a GPU: the fused kernels for a float32 bias with float32 or bf16 h.
  const bool fused_gpu = glue::fused_on_cuda(h) && bias.scalar_type() == at::kFloat &&
                         (h.scalar_type() == at::kFloat || h.scalar_type() == at::kBFloat16);
  if (!h.is_cpu() && !fused_gpu) return bias_relu_dropout_reference(h, bias, dropout);
  return BiasReluDropoutFunction::apply(h, bias, dropout)[0];
}

}  // namespace nmt::ops
