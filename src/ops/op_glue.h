// Helpers shared by the LibTorch glue of the fused CPU ops: typed data
// pointers (bf16 tensors as the kernels' bf16) and dropout coordinates kept
// in an autograd context.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/custom_function.h>

#include <type_traits>

#include "ops/bf16.h"
#include "ops/random/dropout.h"

namespace nmt::ops::glue {

template <typename U>
U* data(const at::Tensor& t) {
  if constexpr (std::is_same_v<U, bf16>) {
    TORCH_CHECK(t.scalar_type() == at::kBFloat16, "expected a bfloat16 tensor, got ", t.scalar_type());
    static_assert(sizeof(at::BFloat16) == sizeof(bf16));
    return reinterpret_cast<bf16*>(t.data_ptr<at::BFloat16>());
  } else {
    return t.data_ptr<U>();
  }
}

// The dtype pairs the fused CPU ops run in, as f(T{}, U{}): T the residual
// stream's (and the parameters'), U the matrix side's: float/float,
// double/double, float/bf16. `op` names the op in the error for any other.
template <typename F>
void dispatch_stream_side(const char* op, at::ScalarType stream, at::ScalarType side, F&& f) {
  if (stream == at::kFloat && side == at::kFloat) return f(float{}, float{});
  if (stream == at::kDouble && side == at::kDouble) return f(double{}, double{});
  if (stream == at::kFloat && side == at::kBFloat16) return f(float{}, bf16{});
  TORCH_CHECK(false, op, ": unsupported dtypes ", stream, " / ", side);
}

inline void save_dropout(torch::autograd::AutogradContext* ctx, const Dropout& d) {
  ctx->saved_data["dropout_p"] = d.p;
  ctx->saved_data["dropout_seed"] = static_cast<int64_t>(d.seed);
  ctx->saved_data["dropout_step"] = d.step;
  ctx->saved_data["dropout_site"] = d.site;
  ctx->saved_data["dropout_first_row"] = d.first_row;
}

inline Dropout load_dropout(torch::autograd::AutogradContext* ctx) {
  Dropout d;
  d.p = ctx->saved_data["dropout_p"].toDouble();
  d.seed = static_cast<uint64_t>(ctx->saved_data["dropout_seed"].toInt());
  d.step = ctx->saved_data["dropout_step"].toInt();
  d.site = ctx->saved_data["dropout_site"].toInt();
  d.first_row = ctx->saved_data["dropout_first_row"].toInt();
  return d;
}

}  // namespace nmt::ops::glue
