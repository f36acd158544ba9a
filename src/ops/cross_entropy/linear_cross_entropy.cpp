#include "ops/cross_entropy/linear_cross_entropy.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "ops/cross_entropy/cpu/cross_entropy_cpu.h"
#include "ops/linear/dense.h"
#include "ops/op_glue.h"
#ifdef NMT_WITH_CUDA
#include "ops/cross_entropy/cuda/cross_entropy_kernel.h"
#endif

namespace nmt::ops {

namespace {

using torch::autograd::AutogradContext;

// Logits a GPU computes at once: 2^27 (256 MB in bf16) of them.
constexpr int64_t kGpuChunkElements = int64_t{1} << 27;
using torch::autograd::variable_list;

// Loss and gradient of logits z [R, V] (rows of `labels`), into loss [R] and grad [R, V].
void chunk_loss(const at::Tensor& z, const at::Tensor& labels, at::Tensor& loss, at::Tensor& nll,
                at::Tensor& grad, double smoothing, int64_t ignore_index) {
  glue::dispatch_stream_side("linear_cross_entropy", loss.scalar_type(), z.scalar_type(), [&](auto t, auto u) {
    using T = decltype(t);
    using U = decltype(u);
    cpu::CrossEntropyParams<T, U> p{};
    p.logits = glue::data<U>(z);
    p.labels = labels.data_ptr<int64_t>();
    p.grad = grad.defined() ? glue::data<U>(grad) : nullptr;
    p.loss = loss.data_ptr<T>();
    p.nll = nll.defined() ? nll.data_ptr<T>() : nullptr;
    p.rows = z.size(0), p.classes = z.size(1), p.logits_stride = z.stride(0);
    p.ignore_index = ignore_index;
    p.smoothing = smoothing;
#ifdef NMT_WITH_CUDA
    if constexpr (std::is_same_v<T, float>) {
      if (z.is_cuda())
        return glue::launch_cuda(z, "linear_cross_entropy", [&](auto stream) { return cuda::cross_entropy(p, stream); });
    }
#endif
    cpu::cross_entropy(p);
  });
}

struct LinearCrossEntropyFunction : public torch::autograd::Function<LinearCrossEntropyFunction> {
  // bias: an empty tensor stands for "no bias". Returns {loss sum, and with
  // want_nll the sum without smoothing (not differentiable), else empty}.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& h_in, const at::Tensor& weight,
                               const at::Tensor& bias, const at::Tensor& labels_in, double smoothing,
                               int64_t ignore_index, bool need_grad, bool want_nll) {
    RECORD_FUNCTION("nmt::linear_cross_entropy", std::vector<c10::IValue>());
    // bf16 on the CPU: rows padded (labelled ignore_index) to whole blocks of
    // kBf16RowQuantum, so that oneDNN sees few distinct matrix shapes
    // (ops/linear/dense.h says why, and why not on a GPU).
    const int64_t rows_in = h_in.size(0);
    const bool gpu = h_in.is_cuda();
    const bool pad = !gpu && h_in.scalar_type() == at::kBFloat16 && rows_in % kBf16RowQuantum != 0;
    const at::Tensor h = pad ? ops::pad_rows(h_in, kBf16RowQuantum) : h_in.contiguous();
    const at::Tensor labels =
        pad ? ops::pad_rows(labels_in, kBf16RowQuantum, static_cast<double>(ignore_index)) : labels_in.contiguous();
    const bool has_bias = bias.numel() > 0;
    const at::ScalarType stream = weight.scalar_type(), side = h.scalar_type();
    // The product runs in h's dtype; dW and db are summed in weight's.
    const at::Tensor w = weight.to(side).contiguous();
    const at::Tensor b = has_bias ? bias.to(side) : at::Tensor();
    const int64_t n = h.size(0), classes = w.size(0);
    // A GPU takes the rows in as few launches as its memory allows.
    const int64_t chunk = gpu ? std::max<int64_t>(1, kGpuChunkElements / std::max<int64_t>(classes, 1))
                              : cross_entropy_chunk_rows(classes);
    at::Tensor row_loss = at::empty({n}, h.options().dtype(stream));
    at::Tensor row_nll = want_nll ? at::empty({n}, h.options().dtype(stream)) : at::Tensor();
    at::Tensor dh, dw, db;
    if (need_grad) {
      dh = at::empty_like(h);
      dw = at::empty(weight.sizes(), weight.options());  // the first chunk's product writes it
      if (has_bias) db = at::zeros({classes}, weight.options());
    }
    // The logits and their gradient, one chunk at a time, in two buffers
    // every chunk reuses (fresh ones cost page faults on every chunk).
    const int64_t buffer_rows = std::min(chunk, n);
    const at::Tensor z_buffer = at::empty({buffer_rows, classes}, h.options());          // [chunk, V]
    const at::Tensor g_buffer = need_grad ? at::empty_like(z_buffer) : at::Tensor();  // [chunk, V]
    for (int64_t r0 = 0; r0 < n; r0 += chunk) {
      const int64_t rows = std::min(chunk, n - r0);
      const at::Tensor hc = h.narrow(0, r0, rows);
      // logits of this chunk: [rows, V]
      at::Tensor z = z_buffer.narrow(0, 0, rows);
      ops::product_into(z, hc, w.t(), has_bias ? b : at::Tensor());
      at::Tensor g = need_grad ? g_buffer.narrow(0, 0, rows) : at::Tensor();
      at::Tensor loss_c = row_loss.narrow(0, r0, rows);
      at::Tensor nll_c = want_nll ? row_nll.narrow(0, r0, rows) : at::Tensor();
      chunk_loss(z, labels.narrow(0, r0, rows), loss_c, nll_c, g, smoothing, ignore_index);
      if (!need_grad) continue;
      at::Tensor dh_c = dh.narrow(0, r0, rows);
      ops::product_into(dh_c, g, w, at::Tensor());  // dh = G W
      // dW (+)= Gᵀ h, summed in weight's dtype (one product where the device has one)
      add_at_b(dw, g, hc, r0 == 0 ? 0.0f : 1.0f);
      if (has_bias) db.add_(at::sum(g, {0}, /*keepdim=*/false, stream));
    }
    if (need_grad) {
      ctx->save_for_backward({dh.narrow(0, 0, rows_in), dw, has_bias ? db : at::empty({0}, weight.options())});
      // Where the weight's gradient is a float32 buffer of its own (the
      // optimizer's flat one), the backward adds dW · scale into it in one
      // pass: a product dW · scale handed to autograd was a pass to scale
      // and one more to add (3 ms of a bf16 step of configs/real.yaml).
      const at::Tensor wgrad = glue::grad_buffer(weight);
      if (!gpu && wgrad.defined() && wgrad.scalar_type() == at::kFloat) ctx->saved_data["wgrad"] = wgrad;
    }
    at::Tensor nll = want_nll ? row_nll.sum() : at::empty({0}, row_loss.options());
    ctx->mark_non_differentiable({nll});
    return {row_loss.sum(), nll};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& g = grads[0];
    // Usually the loss is divided by a token count: one multiply per tensor.
    const auto scaled = [&](const at::Tensor& t) {
      return t.numel() == 0 ? at::Tensor() : t * g.to(t.scalar_type());
    };
    at::Tensor dw;
    if (ctx->saved_data.count("wgrad") != 0) {
      ctx->saved_data["wgrad"].toTensor().addcmul_(saved[1], g.to(saved[1].scalar_type()));  // autograd adds nothing
    } else {
      dw = scaled(saved[1]);
    }
    return {scaled(saved[0]), dw, scaled(saved[2]), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

int64_t cross_entropy_chunk_rows(int64_t classes) {
  // About 3M logits (12 MB in float32, 6 MB in bf16), in whole 64-row blocks
  // (few distinct shapes): 512 rows of configs/real.yaml's 6,000 classes. On
  // a Xeon with AMX, bf16, it trained at 14.2k tokens/s with 128 rows, 14.9k
  // with 256, 15.2k with 512, 14.5k with 1,024 and 2,048 (60 steps,
  // alternated). In float32 on an AMD EPYC (the op alone, 2,000 rows,
  // forward and backward, alternated in one process) 512 rows took 7-9% less
  // time than 128 (AVX-512 kernels; 3-7% held to AVX2), the weight gradient's
  // 6 MB summed over a quarter of the passes; 1,024 as 512, 2,048 slower.
  const int64_t elements = int64_t{3} << 20;
  return std::max<int64_t>(64, elements / std::max<int64_t>(classes, 1) / 64 * 64);
}

at::Tensor linear_cross_entropy_reference(const at::Tensor& h, const at::Tensor& weight,
                                          const at::Tensor& bias, const at::Tensor& labels,
                                          double smoothing, int64_t ignore_index) {
  // The product in h's dtype, the loss in weight's (as autocast would do it).
  const at::ScalarType side = h.scalar_type();
  const at::Tensor logits =
      at::linear(h, weight.to(side),
                 bias.defined() ? c10::optional<at::Tensor>(bias.to(side)) : c10::nullopt)
          .to(weight.scalar_type());
  return at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum, ignore_index, smoothing);
}

at::Tensor linear_cross_entropy(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& labels, double smoothing, int64_t ignore_index,
                                at::Tensor* nll_sum) {
  TORCH_CHECK(h.dim() == 2 && weight.dim() == 2 && labels.dim() == 1 && h.size(0) == labels.size(0) &&
                  h.size(1) == weight.size(1),
              "linear_cross_entropy: expected h [N, C], weight [V, C], labels [N]; got ", h.sizes(),
              ", ", weight.sizes(), ", ", labels.sizes());
  // On a GPU: the fused loss for float32 parameters and float32 or bf16 h.
  const bool fused_gpu = glue::fused_on_cuda(h) && weight.scalar_type() == at::kFloat &&
                         (h.scalar_type() == at::kFloat || h.scalar_type() == at::kBFloat16) &&
                         labels.scalar_type() == at::kLong;
  if (!h.is_cpu() && !fused_gpu) {
    if (!nll_sum || smoothing == 0) {
      at::Tensor loss = linear_cross_entropy_reference(h, weight, bias, labels, smoothing, ignore_index);
      if (nll_sum) *nll_sum = loss.detach();
      return loss;
    }
    // Both losses from one product of the logits.
    const at::ScalarType side = h.scalar_type();
    const at::Tensor logits =
        at::linear(h, weight.to(side), bias.defined() ? c10::optional<at::Tensor>(bias.to(side)) : c10::nullopt)
            .to(weight.scalar_type());
    {
      at::NoGradGuard no_grad;
      *nll_sum = at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum, ignore_index, 0.0);
    }
    return at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum, ignore_index, smoothing);
  }
  // Gradients are computed in the forward pass, so only when a backward can follow.
  const bool need_grad = at::GradMode::is_enabled() &&
                         (h.requires_grad() || weight.requires_grad() ||
                          (bias.defined() && bias.requires_grad()));
  const bool want_nll = nll_sum != nullptr && smoothing != 0;
  const variable_list out = LinearCrossEntropyFunction::apply(
      h, weight, bias.defined() ? bias : at::empty({0}, weight.options()), labels, smoothing, ignore_index,
      need_grad, want_nll);
  if (nll_sum) *nll_sum = want_nll ? out[1] : out[0].detach();
  return out[0];
}

}  // namespace nmt::ops
