// The `torch` backend: LibTorch's own scaled-dot-product attention, the
// reference the other backends are measured against.
#include <torch/version.h>

#include <cmath>
#include <limits>

#include "ops/attention/attention.h"

namespace nmt::ops {

at::Tensor attention_torch(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const AttentionOptions& options) {
  const int64_t batch = q.size(0), q_len = q.size(2), k_len = k.size(2);
  const double default_scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const double scale = options.scale.value_or(default_scale);

  if (options.dropout.active()) {
    // SDPA's own dropout draws from LibTorch's generator; ours drops the
    // elements every backend drops (attention_params.h), so the
    // probabilities are formed here, as attention_probs does, and multiplied.
    const at::Tensor visible = visibility_mask(batch, q_len, k_len, options, q.options());  // [B,1,Tq,Tk]
    const at::Tensor empty_row = visible.logical_not().all(-1, /*keepdim=*/true);           // [B,1,Tq,1]
    const at::Tensor s = (at::matmul(q, k.transpose(-2, -1)) * scale)
                             .masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity())
                             .masked_fill(empty_row, 0.0);
    const at::Tensor probs = at::softmax(s, -1).masked_fill(empty_row, 0.0);  // [B,H,Tq,Tk]
    const int64_t heads = q.size(1);
    const at::Tensor m = dropout_multipliers(per_head_dropout(options.dropout, heads), batch * heads, k_len,
                                             q_len, q.options())
                             .view({batch, heads, k_len, q_len})
                             .transpose(-1, -2);
    return at::matmul(probs * m, v);
  }

  // LibTorch gives NaN for a row with no visible key. Such rows are opened to
  // every key (a finite softmax) and their output multiplied by 0, so both the
  // output and the gradients flowing back through them are exactly zero.
  c10::optional<at::Tensor> mask;  // std::optional only from 2.x on
  at::Tensor row_visible;
#if TORCH_VERSION_MAJOR >= 2
  // A causal mask alone on a square problem is SDPA's own is_causal (top-left
  // aligned, as ours): no mask tensor, so its fused flash and memory-
  // efficient kernels apply, which refuse an explicit mask or run slower.
  const bool sdpa_causal = options.causal && !options.key_lengths.defined() && q_len == k_len;
#else
  const bool sdpa_causal = false;
#endif
  if ((options.causal && !sdpa_causal) || options.key_lengths.defined()) {
    at::Tensor m = visibility_mask(batch, q_len, k_len, options, q.options());
    // Only key lengths can empty a row (causal always leaves key 0). Applied
    // unconditionally: checking for empty rows first would cost a host sync
    // on every call.
    if (options.key_lengths.defined()) {
      const at::Tensor empty_row = m.logical_not().all(-1, /*keepdim=*/true);  // [B,1,Tq,1]
      m = m | empty_row;
      row_visible = empty_row.logical_not().to(q.scalar_type());
    }
    mask = m;
  }

#if TORCH_VERSION_MAJOR >= 2
  at::Tensor out = at::scaled_dot_product_attention(q, k, v, mask, 0.0, sdpa_causal, scale);
#else
  // 1.13 has no scale argument (it always uses 1/sqrt(D)); its boolean mask
  // means "may attend", as in 2.x.
  const at::Tensor q_scaled = scale == default_scale ? q : q * (scale / default_scale);
  (void)sdpa_causal;
  at::Tensor out = std::get<0>(at::_scaled_dot_product_attention(
      q_scaled, k, v, mask, 0.0, /*need_attn_weights=*/false, /*is_causal=*/false));
#endif
  if (row_visible.defined()) out = out * row_visible;
  return out;
}

}  // namespace nmt::ops
