// Dispatch: an explicit switch over backends and devices.
#include "ops/attention/attention.h"

#include <cmath>

#include "ops/op_glue.h"

namespace nmt::ops {

Dropout per_head_dropout(const Dropout& d, int64_t heads) {
  Dropout g = d;
  g.first_row = d.first_row * heads;
  return g;
}

at::Tensor packed_starts(const at::Tensor& lengths) {
  const at::Tensor len = lengths.to(at::kCPU, at::kLong).contiguous();
  at::Tensor starts = at::zeros({len.numel() + 1}, len.options());
  if (len.numel() > 0) starts.narrow(0, 1, len.numel()).copy_(at::cumsum(len, 0));
  return starts;
}

at::Tensor visibility_mask(int64_t batch, int64_t q_len, int64_t k_len,
                           const AttentionOptions& options, const at::TensorOptions& device) {
  auto opts = device.dtype(at::kLong);
  at::Tensor mask = at::ones({batch, 1, q_len, k_len}, device.dtype(at::kBool));
  const at::Tensor j = at::arange(k_len, opts);
  if (options.causal) {
    const at::Tensor i = at::arange(q_len, opts);
    mask = mask & (j.view({1, 1, 1, k_len}) <= i.view({1, 1, q_len, 1}));
  }
  if (options.key_lengths.defined()) {
    const at::Tensor len = options.key_lengths.to(mask.device(), at::kLong).view({batch, 1, 1, 1});
    mask = mask & (j.view({1, 1, 1, k_len}) < len);
  }
  return mask;
}

at::Tensor attention_probs(const at::Tensor& q, const at::Tensor& k,
                           const AttentionOptions& options) {
  at::NoGradGuard no_grad;
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * scale;
  const at::Tensor mask = visibility_mask(q.size(0), q.size(2), k.size(2), options, q.options());
  s = s.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  // Rows with no visible key: softmax would be NaN; they attend to nothing.
  const at::Tensor empty_row = mask.logical_not().all(-1, /*keepdim=*/true);
  return at::softmax(s.masked_fill(empty_row, 0.0), -1).masked_fill(empty_row, 0.0);
}

static void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const AttentionOptions& options) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "attention: q, k, v must be 4-D");
  TORCH_CHECK(q.size(0) == k.size(0) && k.sizes() == v.sizes() && q.size(1) == k.size(1) &&
                  q.size(3) == k.size(3),
              "attention: shapes q ", q.sizes(), " k ", k.sizes(), " v ", v.sizes(),
              " do not fit [B,H,Tq,D], [B,H,Tk,D], [B,H,Tk,D]");
  TORCH_CHECK(q.size(2) >= 1 && k.size(2) >= 1, "attention: Tq and Tk must be >= 1");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && k.scalar_type() == v.scalar_type(),
              "attention: q, k, v dtypes differ");
  TORCH_CHECK(q.device() == k.device() && k.device() == v.device(),
              "attention: q, k, v devices differ");
  if (options.key_lengths.defined())
    TORCH_CHECK(options.key_lengths.dim() == 1 && options.key_lengths.size(0) == q.size(0),
                "attention: key_lengths must be [B]");
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const AttentionOptions& options, AttentionBackend backend) {
  check_inputs(q, k, v, options);
  const bool cuda = q.is_cuda();
  // The CUDA kernels have no attention dropout: on a GPU a call with it runs
  // the torch backend's composition (the same masks), whatever the backend.
  if (cuda && options.dropout.active()) return attention_torch(q, k, v, options);
  switch (backend) {
    case AttentionBackend::kTorch:
      return attention_torch(q, k, v, options);
    case AttentionBackend::kNaive:
#ifdef NMT_WITH_CUDA
      if (cuda) return attention_naive_cuda(q, k, v, options);
#endif
      TORCH_CHECK(!cuda, "naive attention: this build has no CUDA kernels");
      return attention_naive_cpu(q, k, v, options);
    case AttentionBackend::kFlash:
#ifdef NMT_WITH_CUDA
      if (cuda) return attention_flash_cuda(q, k, v, options);
#endif
      TORCH_CHECK(!cuda, "flash attention: this build has no CUDA kernels");
      return attention_flash_cpu(q, k, v, options);
  }
  TORCH_CHECK(false, "attention: unknown backend");
}

namespace {

// [B, T, W] columns [col, col + H·D) as [B, H, T, D].
at::Tensor split_heads(const at::Tensor& src, int64_t col, int64_t heads, int64_t channels) {
  return src.narrow(2, col, channels)
      .view({src.size(0), src.size(1), heads, channels / heads})
      .transpose(1, 2);
}

// [B, H, T, D] -> [B, T, C]
at::Tensor merge_heads(const at::Tensor& o) {
  return o.transpose(1, 2).reshape({o.size(0), o.size(2), o.size(1) * o.size(3)});
}

bool packed_kernels(const at::Tensor& t, AttentionBackend backend) {
  return t.is_cpu() && backend != AttentionBackend::kTorch;
}

// Packed sentences reach CPU flash's kernels only (attention_params.h).
bool packed_rows(const at::Tensor& t, AttentionBackend backend, const AttentionOptions& options) {
  if (!options.query_starts.defined() && !options.key_starts.defined()) return false;
  TORCH_CHECK(t.is_cpu() && backend == AttentionBackend::kFlash,
              "attention: packed sentences (query_starts, key_starts) take CPU flash, got ",
              backend_name(backend), " on ", t.device());
  return true;
}

#ifdef NMT_WITH_CUDA
// bf16 projections on a GPU with flash: its tensor-core kernels take the
// packed form (with the fused training ops: one switch, op_glue.h).
bool packed_cuda(const at::Tensor& t, AttentionBackend backend, const AttentionOptions& options) {
  return glue::fused_on_cuda(t) && backend == AttentionBackend::kFlash && t.scalar_type() == at::kBFloat16 &&
         !options.dropout.active();
}
#endif

}  // namespace

at::Tensor self_attention(const at::Tensor& qkv, int64_t heads, const AttentionOptions& options,
                          AttentionBackend backend) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * heads) == 0,
              "self_attention: qkv must be [B, T, 3C] with C divisible by heads, got ", qkv.sizes());
  if (packed_rows(qkv, backend, options) || packed_kernels(qkv, backend))
    return packed_attention_cpu(qkv, at::Tensor(), heads, options, backend);
#ifdef NMT_WITH_CUDA
  if (packed_cuda(qkv, backend, options))
    if (at::Tensor o = packed_flash_attention_cuda(qkv, at::Tensor(), heads, options); o.defined()) return o;
#endif
  const int64_t C = qkv.size(2) / 3;
  return merge_heads(attention(split_heads(qkv, 0, heads, C), split_heads(qkv, C, heads, C),
                               split_heads(qkv, 2 * C, heads, C), options, backend));
}

at::Tensor cross_attention(const at::Tensor& q, const at::Tensor& kv, int64_t heads,
                           const AttentionOptions& options, AttentionBackend backend) {
  TORCH_CHECK(q.dim() == 3 && kv.dim() == 3 && kv.size(2) == 2 * q.size(2) && q.size(2) % heads == 0,
              "cross_attention: expected q [B, Tq, C] and kv [B, Tk, 2C], got ", q.sizes(), " and ",
              kv.sizes());
  if (packed_rows(q, backend, options) || packed_kernels(q, backend))
    return packed_attention_cpu(q, kv, heads, options, backend);
#ifdef NMT_WITH_CUDA
  if (packed_cuda(q, backend, options) && kv.scalar_type() == at::kBFloat16)
    if (at::Tensor o = packed_flash_attention_cuda(q, kv, heads, options); o.defined()) return o;
#endif
  const int64_t C = q.size(2);
  return merge_heads(attention(split_heads(q, 0, heads, C), split_heads(kv, 0, heads, C),
                               split_heads(kv, C, heads, C), options, backend));
}

}  // namespace nmt::ops
