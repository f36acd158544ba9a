#include "ops/linear/packed_linear.h"

#include <algorithm>
#include <cmath>

#include "ops/linear/cpu/packed_matmul_cpu.h"
#include "ops/linear/cpu/rows_matmul_cpu.h"
#include "util/cpu_features.h"

namespace nmt::ops {

const char* compute_type_name(ComputeType type) {
  switch (type) {
    case ComputeType::kFloat32: return "float32";
    case ComputeType::kBf16: return "bf16";
    case ComputeType::kInt8: return "int8";
  }
  return "?";
}

std::optional<ComputeType> parse_compute_type(const std::string& name) {
  for (ComputeType t : {ComputeType::kFloat32, ComputeType::kBf16, ComputeType::kInt8})
    if (name == compute_type_name(t)) return t;
  return std::nullopt;
}

std::string compute_type_choices() { return kComputeTypeChoices.listed(); }

ComputeType resolve_compute_type(ComputeTypeChoice choice) {
  switch (choice) {
    case ComputeTypeChoice::kFloat32: return ComputeType::kFloat32;
    case ComputeTypeChoice::kBf16: return ComputeType::kBf16;
    case ComputeTypeChoice::kInt8: return ComputeType::kInt8;
    case ComputeTypeChoice::kAuto: break;
  }
  return kernel_isa() >= CpuIsa::kAvx2 ? ComputeType::kInt8 : ComputeType::kFloat32;
}

std::optional<ComputeType> resolve_compute_type(const std::string& name) {
  const std::optional<ComputeTypeChoice> choice = kComputeTypeChoices.find(name);
  if (!choice) return std::nullopt;
  return resolve_compute_type(*choice);
}

PackedLinear::PackedLinear(ComputeType type, const float* w, const float* bias, int64_t in, int64_t out)
    : type_(type), in_(in), out_(out) {
  if (type == ComputeType::kFloat32) {
    // The same values, in panels (cpu::RowsMatmulParams::panels).
    w_float_.assign(static_cast<size_t>(cpu::panels(out) * cpu::kPanel * in), 0.0f);
    for (int64_t k = 0; k < in; ++k)
      for (int64_t n = 0; n < out; ++n) w_float_[static_cast<size_t>(cpu::panel_index(k, n, in))] = w[k * out + n];
    bias_ = bias;
    return;
  }
  const int64_t padded_out = cpu::panels(out) * cpu::kPanel;
  padded_bias_.assign(static_cast<size_t>(padded_out), 0.0f);
  if (bias) std::copy(bias, bias + out, padded_bias_.begin());
  if (type == ComputeType::kBf16) {
    w_bf16_.assign(static_cast<size_t>(padded_out * cpu::groups(in, cpu::kBf16Group) * cpu::kBf16Group), bf16{0});
    for (int64_t k = 0; k < in; ++k)
      for (int64_t n = 0; n < out; ++n) w_bf16_[cpu::panel_index(k, n, in, cpu::kBf16Group)] = to_bf16(w[k * out + n]);
    return;
  }
  // int8: each output column's own scale, max |w| / 127, so its largest
  // weight is ±127 and none is -128 (the AVX2 kernel relies on that).
  w_int8_.assign(static_cast<size_t>(padded_out * cpu::groups(in, cpu::kInt8Group) * cpu::kInt8Group), 0);
  scale_.assign(static_cast<size_t>(padded_out), 0.0f);
  sum_.assign(static_cast<size_t>(padded_out), 0);
  for (int64_t n = 0; n < out; ++n) {
    float amax = 0.0f;
    for (int64_t k = 0; k < in; ++k) amax = std::max(amax, std::fabs(w[k * out + n]));
    scale_[n] = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t k = 0; k < in; ++k) {
      const auto q = static_cast<int8_t>(std::clamp(std::nearbyint(w[k * out + n] * inv), -127.0f, 127.0f));
      w_int8_[cpu::panel_index(k, n, in, cpu::kInt8Group)] = q;
      sum_[n] += q;
    }
  }
}

PackedLinear PackedLinear::float32_view(const float* w, const float* bias, int64_t in, int64_t out) {
  PackedLinear l;
  l.in_ = in, l.out_ = out, l.w_view_ = w, l.bias_ = bias;
  return l;
}

void PackedLinear::forward(const float* x, int64_t rows, int64_t x_stride, float* y) const {
  if (rows <= 0) return;
  switch (type_) {
    case ComputeType::kFloat32: {
      cpu::RowsMatmulParams m{};
      m.x = x, m.w = w_view_ ? w_view_ : w_float_.data(), m.bias = bias_, m.y = y;
      m.rows = rows, m.in = in_, m.out = out_, m.x_stride = x_stride;
      m.panels = w_view_ == nullptr;
      cpu::rows_matmul(m);
      return;
    }
    case ComputeType::kBf16: {
      cpu::Bf16MatmulParams m{};
      m.x = x, m.w = w_bf16_.data(), m.bias = padded_bias_.data(), m.y = y;
      m.rows = rows, m.in = in_, m.out = out_, m.x_stride = x_stride;
      cpu::bf16_matmul(m);
      return;
    }
    case ComputeType::kInt8: {
      cpu::Int8MatmulParams m{};
      m.x = x, m.w = w_int8_.data(), m.w_scale = scale_.data(), m.w_sum = sum_.data();
      m.bias = padded_bias_.data(), m.y = y;
      m.rows = rows, m.in = in_, m.out = out_, m.x_stride = x_stride;
      cpu::int8_matmul(m);
      return;
    }
  }
}

int64_t PackedLinear::weight_bytes() const {
  switch (type_) {
    case ComputeType::kFloat32:
      return w_view_ ? in_ * out_ * static_cast<int64_t>(sizeof(float)) : static_cast<int64_t>(w_float_.size() * sizeof(float));
    case ComputeType::kBf16: return static_cast<int64_t>(w_bf16_.size() * sizeof(bf16));
    case ComputeType::kInt8: return static_cast<int64_t>(w_int8_.size());
  }
  return 0;
}

}  // namespace nmt::ops
