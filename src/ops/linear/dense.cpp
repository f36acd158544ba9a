#include "ops/linear/dense.h"

#include <cstring>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops/linear/cpu/onednn_gemm.h"
#include "ops/op_glue.h"

namespace nmt::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Where a bf16 product's gradients go straight into float32 buffers
// through oneDNN (add_at_b): bf16 on the CPU.
bool adds_on_cpu(const at::Tensor& x) {
  return x.is_cpu() && x.scalar_type() == at::kBFloat16 && cpu::onednn_gemm_bf16_available();
}

// Every row of out: [N, K] (contiguous, on the CPU) set to b: [K].
void fill_rows(at::Tensor& out, const at::Tensor& b) {
  TORCH_CHECK(out.is_contiguous() && out.dim() == 2 && b.numel() == out.size(1) &&
                  b.scalar_type() == out.scalar_type(),
              "fill_rows: expected a contiguous [N, K] output and a bias of K values in its dtype");
  const at::Tensor row = b.contiguous();
  const size_t bytes = static_cast<size_t>(row.numel()) * row.element_size();
  const char* src = static_cast<const char*>(row.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  at::parallel_for(0, out.size(0), 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) std::memcpy(dst + r * bytes, src, bytes);
  });
}

// n rounded up to a multiple of quantum.
int64_t round_up_rows(int64_t n, int64_t quantum) { return (n + quantum - 1) / quantum * quantum; }

// Whether x: [N, K] (contiguous) has storage for `rows` rows from where it starts.
bool has_rows(const at::Tensor& x, int64_t rows) {
  return x.is_contiguous() && x.has_storage() &&
         (x.storage_offset() + rows * x.size(1)) * static_cast<int64_t>(x.element_size()) <=
             static_cast<int64_t>(x.storage().nbytes());
}

// x · w (+ b) for x: [N, in]. bf16 on the CPU runs in shapes oneDNN has
// seen before (it compiles a kernel per new shape, about 1 ms, and N, a
// batch's token count, is new almost every step): the rows up to the last
// multiple of kBf16RowQuantum in one product, the rest (fewer than the
// quantum) copied into a block of quantum rows. Padding all of x instead
// copied every row, forward and backward: 13.5 ms of a 250 ms step
// (configs/real.yaml in bf16). An x with row room (empty_with_row_room)
// takes one product over whole blocks instead. Elsewhere one product as it is.
at::Tensor product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  // out = rows · w (+ b), written into out. On the CPU the bias rows are
  // written first and the product added to them (addmm with out as its own
  // input): addmm_out(out, b, ...) broadcast b into out with LibTorch's
  // strided copy, 5.5 ms of a 213 ms bf16 step of configs/real.yaml.
  const auto into = [&](at::Tensor out, const at::Tensor& rows) {
    if (!b.defined()) return at::mm_out(out, rows, w);
    if (!out.is_cpu()) return at::addmm_out(out, b, rows, w);
    fill_rows(out, b);
    return at::addmm_out(out, out, rows, w);
  };
  const int64_t n = x.size(0), body = adds_on_cpu(x) ? n - n % kBf16RowQuantum : n;
  if (body < n) {
    // x made with row room (empty_with_row_room): one block of all its rows.
    const int64_t full = round_up_rows(n, kBf16RowQuantum);
    if (has_rows(x, full)) {
      at::Tensor y = at::empty({full, w.size(1)}, x.options());  // [N', out]
      into(y, x.as_strided({full, x.size(1)}, {x.size(1), 1}));
      return y.narrow(0, 0, n);
    }
  }
  at::Tensor y = at::empty({n, w.size(1)}, x.options());  // [N, out]
  if (body > 0) into(y.narrow(0, 0, body), x.narrow(0, 0, body));  // contiguous rows, written in place
  if (body < n) {
    const at::Tensor tail = pad_rows(x.narrow(0, body, n - body), kBf16RowQuantum);  // [quantum, in]
    const at::Tensor tail_y = into(at::empty({kBf16RowQuantum, w.size(1)}, x.options()), tail);
    y.narrow(0, body, n - body).copy_(tail_y.narrow(0, 0, n - body));
  }
  return y;
}

struct DenseFunction : public torch::autograd::Function<DenseFunction> {
  // b and b_side: empty tensors stand for "no bias" (1.13 rejects undefined arguments).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                               const at::Tensor& w_side, const at::Tensor& b, const at::Tensor& b_side) {
    RECORD_FUNCTION("nmt::dense", std::vector<c10::IValue>());
    const bool has_bias = b.numel() > 0;
    const at::Tensor y = product(x, w_side, has_bias ? b_side : at::Tensor());  // [N, out]
    ctx->save_for_backward({x, w_side});
    ctx->saved_data["has_bias"] = has_bias;
    // The flat gradient buffer's view (the same tensor every step).
    const at::Tensor wgrad = glue::grad_buffer(w);
    if (wgrad.defined() && wgrad.scalar_type() == at::kFloat) ctx->saved_data["wgrad"] = wgrad;
    // On the CPU the bias gradient too (on a GPU LibTorch's column sum is one kernel already).
    if (has_bias && adds_on_cpu(x)) {
      const at::Tensor bgrad = glue::grad_buffer(b);
      if (bgrad.defined() && bgrad.scalar_type() == at::kFloat) ctx->saved_data["bgrad"] = bgrad;
    }
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w_side = saved[1];  // x: [N, in]
    const at::Tensor dy = grads[0].contiguous();            // [N, out]
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = product(dy, w_side.t(), at::Tensor());  // [N, in]
    if (ctx->needs_input_grad(1)) {
      if (ctx->saved_data.count("wgrad") != 0) {
        at::Tensor wgrad = ctx->saved_data["wgrad"].toTensor();
        add_at_b(wgrad, x, dy);  // autograd adds nothing more: dw stays undefined
      } else {
        dw = at::mm(x.t(), dy).to(at::kFloat);
      }
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(3)) {
      if (ctx->saved_data.count("bgrad") != 0) {
        // db += 1ᵀ dy as a product into the float32 buffer: LibTorch's sum of
        // bf16 columns into float32 first widened all of dy into a copy.
        at::Tensor bgrad = ctx->saved_data["bgrad"].toTensor().view({1, -1});
        add_at_b(bgrad, at::ones({dy.size(0), 1}, dy.options()), dy);
      } else {
        db = at::sum(dy, {0}, /*keepdim=*/false, at::kFloat);
      }
    }
    return {dx, dw, at::Tensor(), db, at::Tensor()};
  }
};

}  // namespace

at::Tensor pad_rows(const at::Tensor& x, int64_t quantum, double fill) {
  const int64_t n = x.size(0), extra = round_up_rows(n, quantum) - n;
  if (extra == 0) return x;
  // The rows copied and only the appended ones filled: constant_pad_nd
  // filled the whole result first, a second pass over every row.
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = n + extra;
  at::Tensor out = at::empty(shape, x.options());
  out.narrow(0, 0, n).copy_(x);
  out.narrow(0, n, extra).fill_(fill);
  return out;
}

at::Tensor empty_with_row_room(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (sizes.empty() || !options.device().is_cpu() || options.dtype() != at::kBFloat16) return at::empty(sizes, options);
  const int64_t last = sizes.back(), rows = last == 0 ? 0 : c10::multiply_integers(sizes) / last;
  const int64_t room = round_up_rows(rows, kBf16RowQuantum);
  if (room == rows) return at::empty(sizes, options);
  at::Tensor storage = at::empty({room, last}, options);
  storage.narrow(0, rows, room - rows).zero_();
  return storage.narrow(0, 0, rows).view(sizes);
}

bool dense_applies(const at::Tensor& x, const at::Tensor& w) {
  if (!at::GradMode::is_enabled() || w.scalar_type() != at::kFloat || x.device() != w.device()) return false;
  // On the CPU only bf16 products: their weight gradients go straight into
  // the float32 buffer through oneDNN (add_at_b). float32 keeps LibTorch's
  // addmm and its autograd, whose arithmetic the loss curves were measured with.
  if (x.device().is_cpu()) return adds_on_cpu(x);
  return glue::fused_on_cuda(x) && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16);
}

at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& w_side, const at::Tensor& b,
                 const at::Tensor& b_side) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(0) && w_side.sizes() == w.sizes() &&
                  x.scalar_type() == w_side.scalar_type(),
              "dense: expected x [N, in] and w, w_side [in, out] with x's dtype on the side; got ", x.sizes(), " ",
              x.scalar_type(), ", ", w.sizes(), ", ", w_side.sizes(), " ", w_side.scalar_type());
  const at::Tensor none = at::empty({0}, w.options());
  return DenseFunction::apply(x.contiguous(), w, w_side, b.defined() ? b : none,
                              b.defined() ? b_side : none.to(x.scalar_type()))[0];
}

void add_at_b(at::Tensor& g, const at::Tensor& a, const at::Tensor& c, float beta) {
  TORCH_CHECK(a.dim() == 2 && c.dim() == 2 && a.size(0) == c.size(0) && g.size(0) == a.size(1) &&
                  g.size(1) == c.size(1) && a.scalar_type() == c.scalar_type(),
              "add_at_b: expected g [M, K], a [N, M], c [N, K] (a and c of one dtype); got ", g.sizes(), ", ",
              a.sizes(), ", ", c.sizes());
  if (a.scalar_type() == g.scalar_type()) {
    g.addmm_(a.t(), c, beta);
    return;
  }
#ifdef NMT_WITH_CUDA
  if (g.is_cuda() && g.scalar_type() == at::kFloat && a.scalar_type() == at::kBFloat16)
    return add_at_b_bf16_cuda(g, a, c, beta);
#endif
  if (adds_on_cpu(a) && g.is_cpu() && g.scalar_type() == at::kFloat && g.is_contiguous() && a.stride(1) == 1 &&
      c.stride(1) == 1) {
    // One product added into g, summed in float32 (cpu/onednn_gemm.h).
    // Recorded as a product of aᵀ and c, so that `nmt train --profile`
    // counts it with the matrix multiplies (after the g it adds into).
    RECORD_FUNCTION("nmt::add_at_b", std::vector<c10::IValue>({g, a.t(), c}));
    cpu::GemmBf16Params p;
    p.trans_a = true;
    p.m = a.size(1), p.n = c.size(1), p.k = a.size(0);
    p.a = glue::data<ops::bf16>(a), p.lda = a.stride(0);
    p.b = glue::data<ops::bf16>(c), p.ldb = c.stride(0);
    p.c = g.data_ptr<float>(), p.ldc = g.stride(0);
    p.beta = beta;
    return cpu::onednn_gemm_bf16(p);
  }
  if (beta == 0) {
    g.copy_(at::mm(a.t(), c));
  } else {
    g.add_(at::mm(a.t(), c).to(g.scalar_type()));
  }
}

}  // namespace nmt::ops
