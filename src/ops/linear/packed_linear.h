// A dense layer's weights as decoding reads them on the CPU, in the compute
// type chosen for decoding (--compute-type): float32 as trained, bf16, or
// int8 quantized per output column. Packed once when a model is readied for
// decoding (model/inference_weights.h); forward() then runs the kernel of the
// CPU's instruction set (ops/linear/cpu/packed_matmul_cpu.h, rows_matmul for
// float32). No LibTorch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nmt/types.h"
#include "ops/bf16.h"
#include "util/choices.h"
#include "util/huge_page_allocator.h"

namespace nmt::ops {

enum class ComputeType { kFloat32, kBf16, kInt8 };

// What a user asks for (decode.compute_type, --compute-type): a type, or
// auto, which resolve_compute_type turns into one for this CPU (the public
// nmt::ComputeType).
using ComputeTypeChoice = nmt::ComputeType;
inline constexpr ChoiceList<ComputeTypeChoice, 4> kComputeTypeChoices{{{
    {ComputeTypeChoice::kFloat32, "float32"},
    {ComputeTypeChoice::kBf16, "bf16"},
    {ComputeTypeChoice::kInt8, "int8"},
    {ComputeTypeChoice::kAuto, "auto"},
}}};

const char* compute_type_name(ComputeType type);
// "float32" | "bf16" | "int8" (not "auto": see resolve_compute_type).
std::optional<ComputeType> parse_compute_type(const std::string& name);
// The names a user may give, "auto" included: "float32 | bf16 | int8 | auto".
std::string compute_type_choices();
// auto: int8 where this CPU has an int8 kernel faster than float32 (AVX2 or
// AVX-512 VNNI), else float32. The others are themselves.
ComputeType resolve_compute_type(ComputeTypeChoice choice);
// The same from a name; an unknown one is std::nullopt.
std::optional<ComputeType> resolve_compute_type(const std::string& name);

class PackedLinear {
 public:
  PackedLinear() = default;
  // w: [in, out] row-major, bias: [out] or nullptr. Each type copies w into
  // its own layout (float32: rows_matmul's panels); float32 keeps the bias
  // pointer (the caller keeps it alive and unchanged).
  PackedLinear(ComputeType type, const float* w, const float* bias, int64_t in, int64_t out);

  // float32 read where it is (w: [in, out] row-major): for weights that
  // change between calls (a model being trained), which a copy would miss.
  // The same results as the packed float32 layer, a little slower at few
  // rows (rows_matmul_cpu.h).
  static PackedLinear float32_view(const float* w, const float* bias, int64_t in, int64_t out);

  // y: [rows, out] = x: [rows, in] (rows x_stride apart) · w + bias.
  void forward(const float* x, int64_t rows, int64_t x_stride, float* y) const;

  ComputeType type() const { return type_; }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  // Bytes a product streams from memory for the weights.
  int64_t weight_bytes() const;

 private:
  ComputeType type_ = ComputeType::kFloat32;
  int64_t in_ = 0, out_ = 0;
  // The weights in 2 MB pages where large (util/huge_page_allocator.h).
  template <typename T>
  using Weights = std::vector<T, HugePageAllocator<T>>;
  Weights<float> w_float_;       // float32: in panels (ops/linear/cpu/rows_matmul_cpu.h)
  const float* w_view_ = nullptr;  // float32_view: the caller's [in, out]
  const float* bias_ = nullptr;  // float32: the caller's [out], or nullptr
  Weights<int8_t> w_int8_;      // int8: packed (ops/linear/cpu/packed_matmul_cpu.h)
  Weights<bf16> w_bf16_;         // bf16: packed
  std::vector<float> scale_;     // int8: per output column, padded to whole panels
  std::vector<int32_t> sum_;     // int8: Σ_k q[k][n], padded
  std::vector<float> padded_bias_;  // bf16, int8: bias (or zeros), padded
};

}  // namespace nmt::ops
