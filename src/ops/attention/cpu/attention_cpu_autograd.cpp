// LibTorch glue for the CPU kernels: tensor checks, parameter structs and the
// autograd wiring. The kernels themselves (naive_cpu.cpp, flash_cpu.cpp) never
// see a tensor. Two entry points:
//   - attention_{naive,flash}_cpu: q, k, v as [B, H, T, D] views of any strides;
//   - packed_attention_cpu: the model's packed projections ([B, T, 3C] for
//     self-attention, [B, Tq, C] and [B, Tk, 2C] for cross-attention); the
//     kernels read heads straight out of them and write o as [B, T, C] and
//     the gradients straight into packed buffers, so no head is split or
//     merged by a copy.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/attention/attention.h"
#include "ops/attention/attention_glue.h"
#include "ops/attention/cpu/attention_cpu.h"
#include "ops/linear/dense.h"
#include "ops/op_glue.h"

namespace nmt::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using glue::fill_common;
using glue::last_dim_contiguous;
using glue::strides_of;

enum class CpuKernel { kNaive, kFlash };

// A call's packed sentences (AttentionOptions::query_starts, key_starts):
// [B + 1] int64 CPU tensors, undefined where that side is padded, with the
// batch and each side's longest sentence, which the kernels take as B, Tq, Tk.
struct PackedRows {
  at::Tensor q_starts, kv_starts;
  int64_t batch = 0, q_len = 0, k_len = 0;
  bool any() const { return q_starts.defined() || kv_starts.defined(); }
};

template <typename Params>
void set_packed_rows(Params& p, const PackedRows& rows) {
  if (!rows.any()) return;
  p.batch = rows.batch;
  if (rows.q_starts.defined()) p.q_starts = rows.q_starts.data_ptr<int64_t>(), p.q_len = rows.q_len;
  if (rows.kv_starts.defined()) p.kv_starts = rows.kv_starts.data_ptr<int64_t>(), p.k_len = rows.k_len;
}

// Forward into o (a [B, H, Tq, D] view of any strides), lse [B, H, Tq] and,
// for naive, probs [B, H, Tq, Tk]. S: the tensors' element type, T: the
// kernels' compute type (and lse's).
template <typename S, typename T>
void forward_kernel(CpuKernel kernel, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& lengths, double scale, bool causal, const Dropout& dropout,
                    const PackedRows& rows, const at::Tensor& o, const at::Tensor& lse, const at::Tensor& probs) {
  AttentionForwardParams<S, T> p{};
  fill_common(p, q, k, v, lengths, scale, causal);
  set_packed_rows(p, rows);
  p.dropout = glue::attention_stream(dropout, p.heads);
  p.q = glue::data<S>(q), p.k = glue::data<S>(k), p.v = glue::data<S>(v);
  p.o = glue::data<S>(o), p.lse = lse.data_ptr<T>();
  strides_of(o, p.o_stride_b, p.o_stride_h, p.o_stride_t);
  if constexpr (std::is_same_v<S, T>) {
    if (kernel == CpuKernel::kNaive) {
      p.probs = probs.data_ptr<T>();
      return cpu::naive_attention_forward<T>(p);
    }
  }
  TORCH_INTERNAL_ASSERT(kernel == CpuKernel::kFlash);
  cpu::flash_attention_forward(p);
}

// Backward into dq, dk, dv ([B, H, T, D] views of any strides).
template <typename S, typename T>
void backward_kernel(CpuKernel kernel, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& o, const at::Tensor& lse, const at::Tensor& probs,
                     const at::Tensor& d_o, const at::Tensor& lengths, double scale, bool causal,
                     const Dropout& dropout, const PackedRows& rows, const at::Tensor& dq, const at::Tensor& dk,
                     const at::Tensor& dv) {
  AttentionBackwardParams<S, T> p{};
  fill_common(p, q, k, v, lengths, scale, causal);
  set_packed_rows(p, rows);
  p.dropout = glue::attention_stream(dropout, p.heads);
  p.q = glue::data<S>(q), p.k = glue::data<S>(k), p.v = glue::data<S>(v);
  p.d_o = glue::data<S>(d_o);
  p.dq = glue::data<S>(dq), p.dk = glue::data<S>(dk), p.dv = glue::data<S>(dv);
  strides_of(d_o, p.do_stride_b, p.do_stride_h, p.do_stride_t);
  strides_of(dq, p.dq_stride_b, p.dq_stride_h, p.dq_stride_t);
  strides_of(dk, p.dk_stride_b, p.dk_stride_h, p.dk_stride_t);
  strides_of(dv, p.dv_stride_b, p.dv_stride_h, p.dv_stride_t);
  if constexpr (std::is_same_v<S, T>) {
    if (kernel == CpuKernel::kNaive) {
      p.probs = probs.data_ptr<T>();
      return cpu::naive_attention_backward<T>(p);
    }
  }
  TORCH_INTERNAL_ASSERT(kernel == CpuKernel::kFlash);
  p.o = glue::data<S>(o), p.lse = lse.data_ptr<T>();
  strides_of(o, p.o_stride_b, p.o_stride_h, p.o_stride_t);
  cpu::flash_attention_backward(p);
}

// fn(S{}, T{}) for the tensors' element type: float and double compute in
// themselves; bf16 (flash only: the packed projections of a bf16 model) in float.
template <typename Fn>
void dispatch_storage(at::ScalarType type, CpuKernel kernel, const char* who, Fn&& fn) {
  switch (type) {
    case at::kFloat: return fn(float{}, float{});
    case at::kDouble: return fn(double{}, double{});
    case at::kBFloat16:
      if (kernel == CpuKernel::kFlash) return fn(bf16{}, float{});
      [[fallthrough]];
    default:
      TORCH_CHECK(false, who, ": CPU kernels take float32 or float64 (and bf16 for flash), got ", type);
  }
}

// The kernels' compute type for tensors of `type` (lse's dtype).
at::ScalarType compute_type(at::ScalarType type) { return type == at::kBFloat16 ? at::kFloat : type; }

// The state a forward leaves for the backward: naive keeps P [B,H,Tq,Tk],
// flash only O and the logsumexp.
struct Saved {
  at::Tensor o, lse, probs;
};

// o: [B, H, Tq, D] view of o_storage; returns what the backward needs.
Saved run_forward(CpuKernel kernel, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const at::Tensor& lengths, double scale, bool causal, const Dropout& dropout,
                  const at::Tensor& o, const PackedRows& rows = {}) {
  const int64_t H = q.size(1);
  const int64_t B = rows.any() ? rows.batch : q.size(0);
  const int64_t Tq = rows.q_starts.defined() ? rows.q_len : q.size(2);
  const int64_t Tk = rows.kv_starts.defined() ? rows.k_len : k.size(2);
  TORCH_INTERNAL_ASSERT(kernel == CpuKernel::kFlash || !rows.any(), "packed sentences take flash");
  Saved s{o, at::empty({B, H, Tq}, q.options().dtype(compute_type(q.scalar_type()))),
          kernel == CpuKernel::kNaive ? at::empty({B, H, Tq, Tk}, q.options()) : at::Tensor()};
  dispatch_storage(q.scalar_type(), kernel, "attention", [&](auto s_zero, auto t_zero) {
    forward_kernel<decltype(s_zero), decltype(t_zero)>(kernel, q, k, v, lengths, scale, causal, dropout, rows, o,
                                                       s.lse, s.probs);
  });
  return s;
}

// Saves the inputs (whatever the backward rebuilds q, k, v from), then the state.
void save(AutogradContext* ctx, std::vector<at::Tensor> inputs, CpuKernel kernel, const Saved& s,
          const at::Tensor& lengths, bool causal, double scale, const Dropout& dropout, const PackedRows& rows = {}) {
  ctx->saved_data["causal"] = causal;
  if (rows.any()) {
    // (int64 index tensors, never differentiated: kept as values)
    if (rows.q_starts.defined()) ctx->saved_data["q_starts"] = rows.q_starts;
    if (rows.kv_starts.defined()) ctx->saved_data["kv_starts"] = rows.kv_starts;
    ctx->saved_data["packed_dims"] = std::vector<int64_t>{rows.batch, rows.q_len, rows.k_len};
  }
  glue::save_dropout(ctx->saved_data, dropout);
  ctx->saved_data["scale"] = scale;
  ctx->saved_data["inputs"] = static_cast<int64_t>(inputs.size());
  if (kernel == CpuKernel::kNaive) {
    inputs.insert(inputs.end(), {s.probs, lengths});
  } else {
    inputs.insert(inputs.end(), {s.o, s.lse, lengths});
  }
  ctx->save_for_backward(inputs);
}

// The saved inputs (first save() argument).
std::vector<at::Tensor> saved_inputs(AutogradContext* ctx) {
  auto saved = ctx->get_saved_variables();
  saved.resize(static_cast<size_t>(ctx->saved_data["inputs"].toInt()));
  return saved;
}

void run_backward(AutogradContext* ctx, CpuKernel kernel, const at::Tensor& q, const at::Tensor& k,
                  const at::Tensor& v, const at::Tensor& d_o, const at::Tensor& dq,
                  const at::Tensor& dk, const at::Tensor& dv) {
  const auto saved = ctx->get_saved_variables();
  const size_t n = static_cast<size_t>(ctx->saved_data["inputs"].toInt());
  Saved s;
  at::Tensor lengths;
  if (kernel == CpuKernel::kNaive) {
    s.probs = saved[n], lengths = saved[n + 1];
  } else {
    s.o = saved[n], s.lse = saved[n + 1], lengths = saved[n + 2];
  }
  const bool causal = ctx->saved_data["causal"].toBool();
  const double scale = ctx->saved_data["scale"].toDouble();
  PackedRows rows;
  if (ctx->saved_data.count("packed_dims") != 0) {
    if (ctx->saved_data.count("q_starts") != 0) rows.q_starts = ctx->saved_data["q_starts"].toTensor();
    if (ctx->saved_data.count("kv_starts") != 0) rows.kv_starts = ctx->saved_data["kv_starts"].toTensor();
    const auto dims = ctx->saved_data["packed_dims"].toIntVector();
    rows.batch = dims[0], rows.q_len = dims[1], rows.k_len = dims[2];
  }
  dispatch_storage(q.scalar_type(), kernel, "attention backward", [&](auto s_zero, auto t_zero) {
    backward_kernel<decltype(s_zero), decltype(t_zero)>(kernel, q, k, v, s.o, s.lse, s.probs, d_o, lengths, scale,
                                                        causal, glue::saved_dropout(ctx->saved_data), rows, dq, dk,
                                                        dv);
  });
}

// q, k, v as [B, H, T, D] views. o is laid out [B, Tq, H, D] in memory (the
// model's next step reads it as [B, Tq, C] rows) and returned as a view.
template <CpuKernel kKernel>
struct CpuAttentionFunction : public torch::autograd::Function<CpuAttentionFunction<kKernel>> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor q, at::Tensor k, at::Tensor v,
                            at::Tensor key_lengths, bool causal, double scale, Dropout dropout) {
    RECORD_FUNCTION(kKernel == CpuKernel::kNaive ? "nmt::attention_naive" : "nmt::attention_flash",
                    std::vector<c10::IValue>());
    // bf16 reaches the kernels only as a bf16 model's packed projections
    // (PackedAttentionFunction, which tests it); views stay float32 or float64.
    TORCH_CHECK(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble,
                "attention: CPU kernels compute in float32 or float64, got ", q.scalar_type());
    q = last_dim_contiguous(q), k = last_dim_contiguous(k), v = last_dim_contiguous(v);
    const at::Tensor lengths = glue::lengths_on(key_lengths, at::kCPU);
    const at::Tensor o =
        at::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.options()).transpose(1, 2);
    const Saved s = run_forward(kKernel, q, k, v, lengths, scale, causal, dropout, o);
    save(ctx, {q, k, v}, kKernel, s, lengths, causal, scale, dropout);
    return o;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto in = saved_inputs(ctx);
    const at::Tensor &q = in[0], &k = in[1], &v = in[2];
    const at::Tensor d_o = last_dim_contiguous(grad_outputs[0]);
    const at::Tensor dq = at::empty(q.sizes(), q.options()), dk = at::empty(k.sizes(), k.options()),
                     dv = at::empty(v.sizes(), v.options());
    run_backward(ctx, kKernel, q, k, v, d_o, dq, dk, dv);
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// H heads of D columns starting at column `col` of src [B, T, W], as a
// [B, H, T, D] view.
at::Tensor heads_of(const at::Tensor& src, int64_t col, int64_t heads, int64_t head_dim) {
  return src.narrow(2, col, heads * head_dim)
      .view({src.size(0), src.size(1), heads, head_dim})
      .transpose(1, 2);
}

// The longest of the sentences `starts` ([B + 1]) delimits in `rows` rows,
// after checking that they are ordered and cover the rows exactly.
int64_t longest_sentence(const at::Tensor& starts, int64_t rows, const char* side) {
  TORCH_CHECK(starts.dim() == 1 && starts.numel() >= 1 && starts.scalar_type() == at::kLong && starts.is_cpu() &&
                  starts.is_contiguous(),
              "attention: ", side, " must be [B + 1] int64 contiguous on the CPU");
  const int64_t* s = starts.data_ptr<int64_t>();
  const int64_t n = starts.numel() - 1;
  int64_t longest = 0;
  TORCH_CHECK(s[0] == 0 && s[n] == rows, "attention: ", side, " must run from 0 to the ", rows, " rows, got ", s[0],
              " to ", s[n]);
  for (int64_t b = 0; b < n; ++b) {
    TORCH_CHECK(s[b + 1] >= s[b], "attention: ", side, " must not decrease");
    longest = std::max(longest, s[b + 1] - s[b]);
  }
  return longest;
}

// The packed sentences of q_src / kv_src ([1, rows, W] where packed;
// self-attention: the queries' for both sides).
PackedRows packed_rows_of(const at::Tensor& q_starts, const at::Tensor& kv_starts, const at::Tensor& q_src,
                          const at::Tensor& kv_src, bool self) {
  PackedRows r;
  if (q_starts.numel() > 0) r.q_starts = q_starts;
  if (kv_starts.numel() > 0) r.kv_starts = kv_starts;
  if (self && r.any()) {
    TORCH_CHECK(r.q_starts.defined() && (!r.kv_starts.defined() || r.kv_starts.is_same(r.q_starts) ||
                                         r.kv_starts.equal(r.q_starts)),
                "self_attention: packed sentences need query_starts, and key_starts equal to them");
    r.kv_starts = r.q_starts;
  }
  if (!r.any()) return r;
  if (r.q_starts.defined()) {
    TORCH_CHECK(q_src.size(0) == 1, "attention: packed queries come as [1, T, W], got ", q_src.sizes());
    r.q_len = longest_sentence(r.q_starts, q_src.size(1), "query_starts");
    r.batch = r.q_starts.numel() - 1;
  } else {
    r.batch = q_src.size(0);
  }
  if (self && r.kv_starts.defined()) {
    r.k_len = r.q_len;  // the queries' sentences, checked above
  } else if (r.kv_starts.defined()) {
    TORCH_CHECK(kv_src.size(0) == 1 && r.kv_starts.numel() - 1 == r.batch,
                "attention: packed keys come as [1, T, W] with key_starts of B + 1 = ", r.batch + 1,
                " entries, got ", kv_src.sizes(), " and ", r.kv_starts.numel());
    r.k_len = longest_sentence(r.kv_starts, kv_src.size(1), "key_starts");
  } else {
    TORCH_CHECK(kv_src.size(0) == r.batch, "attention: padded keys of batch ", kv_src.size(0), " for ", r.batch,
                " packed sentences");
  }
  return r;
}

// The packed projections of the model. Self-attention: q_src = qkv [B, T, 3C]
// (per token q | k | v) and kv_src empty. Cross-attention: q_src [B, Tq, C],
// kv_src [B, Tk, 2C] (per token k | v). Returns o [B, Tq, C]. The kernels
// compute in float32 or float64; bf16 projections go to flash's kernels as
// they are (read and written in bf16, computed in float32), and are widened
// on the way in and the output narrowed on the way out for naive.
template <CpuKernel kKernel>
struct PackedAttentionFunction
    : public torch::autograd::Function<PackedAttentionFunction<kKernel>> {
  // q_starts, kv_starts: empty tensors stand for padded sides (PackedRows).
  static at::Tensor forward(AutogradContext* ctx, at::Tensor q_src, at::Tensor kv_src,
                            at::Tensor key_lengths, bool causal, double scale, int64_t heads,
                            Dropout dropout, at::Tensor q_starts, at::Tensor kv_starts) {
    RECORD_FUNCTION(kKernel == CpuKernel::kNaive ? "nmt::packed_attention_naive" : "nmt::packed_attention_flash",
                    std::vector<c10::IValue>());
    const bool self = kv_src.numel() == 0;
    const at::ScalarType io = q_src.scalar_type();
    const at::ScalarType compute = io == at::kBFloat16 && kKernel == CpuKernel::kNaive ? at::kFloat : io;
    q_src = q_src.to(compute).contiguous();
    kv_src = self ? q_src : kv_src.to(compute).contiguous();
    const int64_t C = self ? q_src.size(2) / 3 : q_src.size(2), D = C / heads;
    const at::Tensor q = heads_of(q_src, 0, heads, D);
    const at::Tensor k = heads_of(kv_src, self ? C : 0, heads, D);
    const at::Tensor v = heads_of(kv_src, self ? 2 * C : C, heads, D);
    const at::Tensor lengths = glue::lengths_on(key_lengths, at::kCPU);
    const PackedRows rows = packed_rows_of(q_starts, kv_starts, q_src, kv_src, self);
    const at::Tensor o = empty_with_row_room({q_src.size(0), q_src.size(1), C}, q_src.options());  // [B, Tq, C]
    const Saved s = run_forward(kKernel, q, k, v, lengths, scale, causal, dropout, heads_of(o, 0, heads, D), rows);
    save(ctx, {q_src, self ? at::Tensor() : kv_src}, kKernel, s, lengths, causal, scale, dropout, rows);
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["io"] = static_cast<int64_t>(io);
    return o.to(io);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto in = saved_inputs(ctx);
    const at::Tensor& q_src = in[0];
    const bool self = !in[1].defined();
    const at::Tensor& kv_src = self ? q_src : in[1];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const auto io = static_cast<at::ScalarType>(ctx->saved_data["io"].toInt());
    const int64_t C = self ? q_src.size(2) / 3 : q_src.size(2), D = C / heads;
    const int64_t k_col = self ? C : 0, v_col = self ? 2 * C : C;
    const at::Tensor d_o = grad_outputs[0].to(q_src.scalar_type()).contiguous();  // [B, Tq, C]
    // Gradients written straight into packed buffers shaped like the inputs.
    const at::Tensor d_q_src = empty_like_with_row_room(q_src);
    const at::Tensor d_kv_src = self ? d_q_src : empty_like_with_row_room(kv_src);
    run_backward(ctx, kKernel, heads_of(q_src, 0, heads, D), heads_of(kv_src, k_col, heads, D),
                 heads_of(kv_src, v_col, heads, D), heads_of(d_o, 0, heads, D),
                 heads_of(d_q_src, 0, heads, D), heads_of(d_kv_src, k_col, heads, D),
                 heads_of(d_kv_src, v_col, heads, D));
    return {d_q_src.to(io), self ? at::Tensor() : d_kv_src.to(io), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor packed_attention_cpu(const at::Tensor& q_src, const at::Tensor& kv_src, int64_t heads,
                                const AttentionOptions& options, AttentionBackend backend) {
  const int64_t C = kv_src.defined() ? q_src.size(2) : q_src.size(2) / 3;
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(C / heads)));
  const at::Tensor kv = kv_src.defined() ? kv_src : at::empty({0}, q_src.options());
  const at::Tensor none = at::empty({0}, at::kLong);
  const at::Tensor q_starts = options.query_starts.defined() ? options.query_starts : none;
  const at::Tensor kv_starts = options.key_starts.defined() ? options.key_starts
                               : kv_src.defined()           ? none
                                                            : q_starts;
  const at::Tensor lengths = glue::lengths_argument(options.key_lengths);  // (packed keys: not read)
  if (backend == AttentionBackend::kNaive) {
    TORCH_CHECK(q_starts.numel() == 0 && kv_starts.numel() == 0, "attention: packed sentences take flash");
    return PackedAttentionFunction<CpuKernel::kNaive>::apply(q_src, kv, lengths, options.causal, scale, heads,
                                                          options.dropout, none, none);
  }
  return PackedAttentionFunction<CpuKernel::kFlash>::apply(q_src, kv, lengths, options.causal, scale, heads,
                                                        options.dropout, q_starts, kv_starts);
}

at::Tensor attention_naive_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& options) {
  return CpuAttentionFunction<CpuKernel::kNaive>::apply(q, k, v, glue::lengths_argument(options.key_lengths),
                                                     options.causal, glue::resolve_scale(q, options.scale),
                                                     options.dropout);
}

at::Tensor attention_flash_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionOptions& options) {
  return CpuAttentionFunction<CpuKernel::kFlash>::apply(q, k, v, glue::lengths_argument(options.key_lengths),
                                                     options.causal, glue::resolve_scale(q, options.scale),
                                                     options.dropout);
}

}  // namespace nmt::ops
