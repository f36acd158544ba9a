// Helpers shared by the CPU and CUDA LibTorch glue: tensors in, plain
// parameter structs out.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <optional>

#include "ops/attention/attention.h"
#include "ops/attention/attention_params.h"
#include "ops/random/dropout.h"

namespace nmt::ops::glue {

// Kernels need a contiguous last dimension; other strides are passed through.
inline at::Tensor last_dim_contiguous(const at::Tensor& t) {
  return t.stride(-1) == 1 ? t : t.contiguous();
}

// LibTorch 1.13's autograd::Function rejects undefined tensor arguments, so
// "no key lengths" travels as an empty tensor.
inline at::Tensor lengths_argument(const at::Tensor& key_lengths) {
  return key_lengths.defined() ? key_lengths : at::empty({0}, at::kLong);
}

// key_lengths as int64 on `device`, or undefined when empty (all keys valid).
inline at::Tensor lengths_on(const at::Tensor& key_lengths, const at::Device& device) {
  return key_lengths.numel() > 0 ? key_lengths.to(device, at::kLong).contiguous() : at::Tensor();
}

// Batch, head and time strides of a [B, H, T, D] view.
inline void strides_of(const at::Tensor& t, int64_t& b, int64_t& h, int64_t& time) {
  b = t.stride(0), h = t.stride(1), time = t.stride(2);
}

// Outputs (and, backward, d_o) laid out contiguous [B, H, T, D]: what the
// CUDA kernels assume; the CPU glue sets other strides where it has them.
template <typename T, typename Stat>
void contiguous_outputs(AttentionForwardParams<T, Stat>& p) {
  p.o_stride_t = p.head_dim, p.o_stride_h = p.q_len * p.head_dim, p.o_stride_b = p.heads * p.o_stride_h;
}
template <typename T, typename Stat>
void contiguous_outputs(AttentionBackwardParams<T, Stat>& p) {
  const int64_t D = p.head_dim;
  p.o_stride_t = p.do_stride_t = p.dq_stride_t = D;
  p.o_stride_h = p.do_stride_h = p.dq_stride_h = p.q_len * D;
  p.o_stride_b = p.do_stride_b = p.dq_stride_b = p.heads * p.q_len * D;
  p.dk_stride_t = p.dv_stride_t = D;
  p.dk_stride_h = p.dv_stride_h = p.k_len * D;
  p.dk_stride_b = p.dv_stride_b = p.heads * p.k_len * D;
}

// Sizes, strides, mask options of q [B,H,Tq,D], k/v [B,H,Tk,D].
template <typename Params>
void fill_common(Params& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const at::Tensor& lengths, double scale, bool causal) {
  p.key_lengths = lengths.defined() ? lengths.data_ptr<int64_t>() : nullptr;
  p.q_stride_b = q.stride(0), p.q_stride_h = q.stride(1), p.q_stride_t = q.stride(2);
  p.k_stride_b = k.stride(0), p.k_stride_h = k.stride(1), p.k_stride_t = k.stride(2);
  p.v_stride_b = v.stride(0), p.v_stride_h = v.stride(1), p.v_stride_t = v.stride(2);
  p.batch = q.size(0), p.heads = q.size(1), p.q_len = q.size(2), p.k_len = k.size(2);
  p.head_dim = q.size(3);
  p.scale = static_cast<decltype(p.scale)>(scale);
  p.causal = causal;
  contiguous_outputs(p);
}

// The kernels' attention dropout stream for `heads` heads (attention_params.h).
inline philox::DropoutStream attention_stream(const Dropout& d, int64_t heads) {
  return d.active() ? per_head_dropout(d, heads).stream() : philox::DropoutStream{};
}

// A Dropout through an autograd context's saved_data, and back.
// (Map: AutogradContext::saved_data, string -> IValue.)
template <typename Map>
void save_dropout(Map& saved, const Dropout& d) {
  saved["dropout_p"] = d.p;
  saved["dropout_seed"] = static_cast<int64_t>(d.seed);
  saved["dropout_step"] = d.step;
  saved["dropout_site"] = d.site;
  saved["dropout_first_row"] = d.first_row;
}
template <typename Map>
Dropout saved_dropout(const Map& saved) {
  Dropout d;
  d.p = saved.at("dropout_p").toDouble();
  d.seed = static_cast<uint64_t>(saved.at("dropout_seed").toInt());
  d.step = saved.at("dropout_step").toInt();
  d.site = saved.at("dropout_site").toInt();
  d.first_row = saved.at("dropout_first_row").toInt();
  return d;
}

inline double resolve_scale(const at::Tensor& q, const std::optional<double>& scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

}  // namespace nmt::ops::glue
