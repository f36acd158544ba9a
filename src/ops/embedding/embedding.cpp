#include "ops/embedding/embedding.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops/embedding/cpu/embedding_cpu.h"
#include "ops/op_glue.h"
#ifdef NMT_WITH_CUDA
#include "ops/embedding/cuda/embedding_kernel.h"
#endif

namespace nmt::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename F>
void dispatch_types(at::ScalarType t, F&& f) {
  if (t == at::kFloat) return f(float{});
  if (t == at::kDouble) return f(double{});
  TORCH_CHECK(false, "embed_tokens: unsupported dtype ", t);
}

struct EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& ids_in, const at::Tensor& table,
                               const at::Tensor& positions, int64_t offset, double scale,
                               int64_t padding_id, Dropout dropout) {
    RECORD_FUNCTION("nmt::embed_tokens", std::vector<c10::IValue>());
    const at::Tensor ids = ids_in.contiguous();
    // On a GPU the check would stop the host for every call: there the ids
    // come checked (prepared corpora are checked as they are read, decoding
    // feeds the model its own outputs).
    TORCH_CHECK(ids.is_cuda() || ids.numel() == 0 ||
                    (ids.min().item<int64_t>() >= 0 && ids.max().item<int64_t>() < table.size(0)),
                "embed_tokens: token id out of range [0, ", table.size(0), ")");
    TORCH_CHECK(offset + ids.size(1) <= positions.size(0), "embed_tokens: sequence of ",
                offset + ids.size(1), " tokens exceeds the position table's ", positions.size(0));
    at::Tensor out = at::empty({ids.size(0), ids.size(1), table.size(1)}, table.options());
    dispatch_types(table.scalar_type(), [&](auto t) {
      using T = decltype(t);
      cpu::EmbeddingParams<T> p{};
      p.ids = ids.data_ptr<int64_t>();
      p.table = table.contiguous().data_ptr<T>();
      p.positions = positions.contiguous().data_ptr<T>();
      p.out = out.data_ptr<T>();
      p.batch = ids.size(0), p.length = ids.size(1), p.channels = table.size(1);
      p.vocab = table.size(0);
      p.position_offset = offset;
      p.scale = static_cast<T>(scale);
      p.dropout = dropout.stream();
#ifdef NMT_WITH_CUDA
      if constexpr (std::is_same_v<T, float>) {
        if (out.is_cuda())
          return glue::launch_cuda(out, "embed_tokens", [&](auto stream) { return cuda::embedding_forward(p, stream); });
      }
#endif
      cpu::embedding_forward(p);
    });
    ctx->save_for_backward({ids});
    // On the CPU, where the table's gradient is a float32 buffer of its own
    // (the optimizer's flat one), the backward adds the rows into it: a
    // table of gradients handed to autograd was zero-filled first and then
    // added by AccumulateGrad, two more passes over the whole table.
    const at::Tensor grad = glue::grad_buffer(table);
    if (table.is_cpu() && grad.defined()) ctx->saved_data["grad"] = grad;
    ctx->saved_data["vocab"] = table.size(0);
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["padding_id"] = padding_id;
    glue::save_dropout(ctx, dropout);
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor ids = ctx->get_saved_variables()[0];
    const at::Tensor dout = grads[0].contiguous();
    const int64_t vocab = ctx->saved_data["vocab"].toInt();
    // The GPU kernel adds into a zero-filled table; the CPU kernel fills it,
    // or adds into the table's gradient buffer.
    const bool into_grad = ctx->saved_data.count("grad") != 0;
    at::Tensor dtable = into_grad        ? ctx->saved_data["grad"].toTensor()
                        : dout.is_cuda() ? at::zeros({vocab, dout.size(-1)}, dout.options())
                                         : at::empty({vocab, dout.size(-1)}, dout.options());
    dispatch_types(dout.scalar_type(), [&](auto t) {
      using T = decltype(t);
      cpu::EmbeddingBackwardParams<T> p{};
      p.ids = ids.data_ptr<int64_t>();
      p.dout = dout.data_ptr<T>();
      p.dtable = dtable.data_ptr<T>();
      p.batch = ids.size(0), p.length = ids.size(1), p.channels = dout.size(-1);
      p.vocab = dtable.size(0);
      p.padding_id = ctx->saved_data["padding_id"].toInt();
      p.scale = static_cast<T>(ctx->saved_data["scale"].toDouble());
      p.dropout = glue::load_dropout(ctx).stream();
      p.accumulate = into_grad;
#ifdef NMT_WITH_CUDA
      if constexpr (std::is_same_v<T, float>) {
        if (dout.is_cuda())
          return glue::launch_cuda(dout, "embed_tokens backward",
                                   [&](auto stream) { return cuda::embedding_backward(p, stream); });
      }
#endif
      cpu::embedding_backward(p);
    });
    return {at::Tensor(), into_grad ? at::Tensor() : dtable, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor embed_tokens_reference(const at::Tensor& ids, const at::Tensor& table,
                                  const at::Tensor& positions, int64_t position_offset,
                                  double scale, int64_t padding_id, const Dropout& dropout) {
  at::Tensor out = at::embedding(table, ids, padding_id) * scale +
                   positions.narrow(0, position_offset, ids.size(1)).unsqueeze(0);
  if (dropout.active())
    out = out * dropout_multipliers(dropout, ids.size(0), ids.size(1), table.size(1), out.options());
  return out;
}

at::Tensor embed_tokens(const at::Tensor& ids, const at::Tensor& table, const at::Tensor& positions,
                        int64_t position_offset, double scale, int64_t padding_id,
                        const Dropout& dropout) {
  TORCH_CHECK(ids.dim() == 2 && table.dim() == 2, "embed_tokens: ids [B, T], table [V, C]");
  const bool fused_gpu = glue::fused_on_cuda(table) && table.scalar_type() == at::kFloat && ids.is_cuda() &&
                         ids.scalar_type() == at::kLong && positions.is_cuda();
  if (!table.is_cpu() && !fused_gpu)
    return embed_tokens_reference(ids, table, positions, position_offset, scale, padding_id, dropout);
  return EmbeddingFunction::apply(ids, table, positions, position_offset, scale, padding_id, dropout)[0];
}

}  // namespace nmt::ops
