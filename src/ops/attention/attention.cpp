// Dispatch: an explicit switch over backends and devices.
#include "ops/attention/attention.h"

#include <cmath>


namespace nmt::ops {

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

}  // namespace nmt::ops
