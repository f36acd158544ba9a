#include "ops/linear/dense.h"

#include <cstring>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops/linear/cpu/float_gemm.h"
#include "ops/op_glue.h"

namespace nmt::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Whether x's products on the CPU run on our gemm route: bf16 ones on a
// gemm with float32 output (oneDNN's; their gradients added straight into
// float32 buffers), float32 ones on oneDNN's, MKL's or nmt's sgemm
// (cpu/float_gemm.h says which; on OpenMP's thread pool, not on the BLAS's own).
bool bf16_on_cpu(const at::Tensor& x) {
  return x.is_cpu() && x.scalar_type() == at::kBFloat16 && cpu::bf16_gemm_available();
}
bool float32_on_cpu(const at::Tensor& x) {
  return x.is_cpu() && x.scalar_type() == at::kFloat && cpu::float_gemm_available();
}
bool on_cpu_gemm(const at::Tensor& x) { return bf16_on_cpu(x) || float32_on_cpu(x); }

// t: [rows, cols] as a row-major matrix: its leading dimension (the row
// pitch, at least cols), or 0 when its rows do not have unit stride or overlap.
int64_t row_major_ld(const at::Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  if ((t.stride(1) != 1 && cols > 1) || (rows > 1 && t.stride(0) < cols)) return 0;
  return rows == 1 ? std::max<int64_t>(cols, 1) : t.stride(0);
}

// op(t) for a [rows, cols] tensor whose rows or columns have unit stride:
// whether oneDNN reads it transposed, and its leading dimension.
struct Operand {
  at::Tensor t;  // t itself, or a contiguous copy
  bool trans = false;
  int64_t ld = 0;
};
Operand operand(const at::Tensor& t) {
  if (const int64_t ld = row_major_ld(t)) return {t, false, ld};
  if (const int64_t ld = row_major_ld(t.t())) return {t, true, ld};
  const at::Tensor c = t.contiguous();
  return {c, false, row_major_ld(c)};
}

// c = beta · c + a · b through the bf16 gemm in use or the float32 one
// (cpu/float_gemm.h) for a: [m, k] and b: [k, n] of
// one dtype (bf16 or float32, on_cpu_gemm), into c: [m, n] float32 with rows
// of unit stride. Recorded as a product of a and b after the c it adds
// into, so that `nmt train --profile` counts it with the matrix multiplies.
void cpu_gemm_product(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, float beta) {
  RECORD_FUNCTION("nmt::cpu_gemm", std::vector<c10::IValue>({c, a, b}));
  const Operand oa = operand(a), ob = operand(b);
  const auto fill = [&](auto& p, auto tag) {
    using T = decltype(tag);
    p.trans_a = oa.trans, p.trans_b = ob.trans;
    p.m = a.size(0), p.n = b.size(1), p.k = a.size(1);
    p.a = glue::data<T>(oa.t), p.lda = oa.ld;
    p.b = glue::data<T>(ob.t), p.ldb = ob.ld;
    p.c = c.data_ptr<float>(), p.ldc = row_major_ld(c);
    p.beta = beta;
  };
  if (a.scalar_type() == at::kBFloat16) {
    cpu::GemmParams<bf16> p;
    fill(p, bf16());
    cpu::bf16_gemm(p);
  } else {
    cpu::GemmParams<float> p;
    fill(p, float());
    cpu::float_gemm(p);
  }
}

// Every row of out: [N, K] (rows of unit stride, on the CPU) set to b: [K].
void fill_rows(at::Tensor& out, const at::Tensor& b) {
  TORCH_CHECK(out.dim() == 2 && row_major_ld(out) > 0 && b.numel() == out.size(1) &&
                  b.scalar_type() == out.scalar_type(),
              "fill_rows: expected an [N, K] output with rows of unit stride and a bias of K values in its dtype");
  const at::Tensor row = b.contiguous();
  const size_t bytes = static_cast<size_t>(row.numel()) * row.element_size();
  const size_t pitch = static_cast<size_t>(out.stride(0)) * out.element_size();
  const char* src = static_cast<const char*>(row.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  at::parallel_for(0, out.size(0), 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) std::memcpy(dst + r * pitch, src, bytes);
  });
}

// A column of n ones: [n, 1] in options' dtype and device. Kept per thread
// and dtype and grown as needed: at::ones for every bias gradient cost an
// allocation and a fill each (5 ms of a 515 ms float32 step of
// configs/real.yaml, 37 calls).
at::Tensor ones_column(int64_t n, const at::TensorOptions& options) {
  thread_local std::vector<at::Tensor> kept;
  for (at::Tensor& t : kept) {
    if (t.device() != options.device() || t.scalar_type() != c10::typeMetaToScalarType(options.dtype())) continue;
    if (t.size(0) < n) t = at::ones({std::max(n, 2 * t.size(0)), 1}, options);
    return t.narrow(0, 0, n);
  }
  kept.push_back(at::ones({n, 1}, options));
  return kept.back();
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
  const auto into = [&](at::Tensor out, const at::Tensor& rows) { return product_into(out, rows, w, b); };
  const int64_t n = x.size(0), body = bf16_on_cpu(x) ? n - n % kBf16RowQuantum : n;
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
    if (has_bias && on_cpu_gemm(x)) {
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
        add_at_b(bgrad, ones_column(dy.size(0), dy.options()), dy);
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
  // On the CPU where a gemm for x's dtype is loaded (oneDNN's, or MKL's for
  // float32): weight gradients straight into the float32 buffer, float32
  // products on OpenMP's threads (cpu/float_gemm.h).
  if (x.device().is_cpu()) return on_cpu_gemm(x);
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

at::Tensor product_into(at::Tensor out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias) {
  // On the CPU the bias rows are written first and the product added to
  // them (addmm with out as its own input): addmm_out(out, b, ...) broadcast
  // b into out with LibTorch's strided copy, 5.5 ms of a 213 ms bf16 step of
  // configs/real.yaml.
  if (float32_on_cpu(a) && out.scalar_type() == at::kFloat && out.is_cpu() && out.dim() == 2 &&
      row_major_ld(out) > 0) {
    if (bias.defined()) fill_rows(out, bias);
    cpu_gemm_product(out, a, b, bias.defined() ? 1.0f : 0.0f);
    return out;
  }
  if (!bias.defined()) return at::mm_out(out, a, b);
  if (!out.is_cpu()) return at::addmm_out(out, bias, a, b);
  fill_rows(out, bias);
  return at::addmm_out(out, out, a, b);
}

void add_at_b(at::Tensor& g, const at::Tensor& a, const at::Tensor& c, float beta) {
  TORCH_CHECK(a.dim() == 2 && c.dim() == 2 && a.size(0) == c.size(0) && g.size(0) == a.size(1) &&
                  g.size(1) == c.size(1) && a.scalar_type() == c.scalar_type(),
              "add_at_b: expected g [M, K], a [N, M], c [N, K] (a and c of one dtype); got ", g.sizes(), ", ",
              a.sizes(), ", ", c.sizes());
  const bool cpu_gemm = on_cpu_gemm(a) && g.is_cpu() && g.scalar_type() == at::kFloat && row_major_ld(g) > 0;
  if (cpu_gemm) return cpu_gemm_product(g, a.t(), c, beta);  // one product added into g, summed in float32
  if (a.scalar_type() == g.scalar_type()) {
    g.addmm_(a.t(), c, beta);
    return;
  }
#ifdef NMT_WITH_CUDA
  if (g.is_cuda() && g.scalar_type() == at::kFloat && a.scalar_type() == at::kBFloat16)
    return add_at_b_bf16_cuda(g, a, c, beta);
#endif
  if (beta == 0) {
    g.copy_(at::mm(a.t(), c));
  } else {
    g.add_(at::mm(a.t(), c).to(g.scalar_type()));
  }
}

}  // namespace nmt::ops
