#include "ops/linear/rows_matmul.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include "ops/linear/cpu/rows_matmul_cpu.h"

namespace nmt::ops {

bool rows_matmul_applies(const at::Tensor& x, const at::Tensor& w) {
  return !at::GradMode::is_enabled() && x.device().is_cpu() && x.scalar_type() == at::kFloat &&
         w.scalar_type() == at::kFloat && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(0) &&
         x.stride(1) == 1 && w.is_contiguous();
}

at::Tensor rows_matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  TORCH_CHECK(rows_matmul_applies(x, w), "rows_matmul: expected float32 CPU x [M, K] and w [K, N], no grad; got ",
              x.sizes(), " and ", w.sizes());
  TORCH_CHECK(!bias.defined() || (bias.numel() == w.size(1) && bias.scalar_type() == at::kFloat),
              "rows_matmul: bias must be [N] float32");
  RECORD_FUNCTION("nmt::rows_matmul", std::vector<c10::IValue>());
  at::Tensor y = at::empty({x.size(0), w.size(1)}, x.options());
  const at::Tensor b = bias.defined() ? bias.contiguous() : at::Tensor();
  cpu::RowsMatmulParams p{};
  p.x = x.data_ptr<float>();
  p.w = w.data_ptr<float>();
  p.bias = b.defined() ? b.data_ptr<float>() : nullptr;
  p.y = y.data_ptr<float>();
  p.rows = x.size(0);
  p.in = x.size(1);
  p.out = w.size(1);
  p.x_stride = x.size(0) > 1 ? x.stride(0) : x.size(1);
  if (p.rows > 0) cpu::rows_matmul(p);
  return y;
}

at::Tensor rows_matmul_reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const at::Tensor y = at::mm(x.to(at::kDouble), w.to(at::kDouble));
  return bias.defined() ? y + bias.to(at::kDouble) : y;
}

}  // namespace nmt::ops
