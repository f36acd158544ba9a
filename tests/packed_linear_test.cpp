// Decoding's int8 and bf16 matrix products (ops/linear/packed_linear.h)
// against scalar references: int8 sums exactly equal to int32 arithmetic,
// the quantization error within its bound, bf16 against the float64 product
// of the bf16-rounded operands. ctest runs these once per instruction set
// (kernels.ops_*: NMT_CPU_ISA=generic, avx2, avx512 (AVX2's int8 kernel), and
// the CPU's best, avx512vnni here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/linear/cpu/packed_matmul_cpu.h"
#include "ops/linear/packed_linear.h"
#include "util/cpu_features.h"

namespace nmt::ops {
namespace {

struct Shape {
  int64_t rows, in, out;
};

// Rows 1..13 cover every leftover-row tile of every ISA (6 and 2 rows per
// tile); k not a multiple of 4 pads the last group; n past a multiple of 64
// leaves a partial panel; 6000 is the real model's vocabulary.
const Shape kShapes[] = {{1, 1, 1},    {1, 256, 6000}, {2, 37, 65},   {3, 256, 768}, {5, 1024, 256},
                         {6, 7, 200},  {7, 256, 64},   {13, 130, 129}, {32, 256, 1024}, {48, 33, 70}};

std::string describe(const Shape& s) {
  return std::to_string(s.rows) + "x" + std::to_string(s.in) + " · " + std::to_string(s.in) + "x" +
         std::to_string(s.out) + " (" + isa_name(kernel_isa()) + ")";
}

// Operands drawn from normal: x, then w (each divided by w_divisor), then bias.
struct Operands {
  std::vector<float> x, w, bias;
};
Operands random_operands(const Shape& s, std::mt19937& rng, std::normal_distribution<float>& normal,
                         float w_divisor) {
  Operands o{std::vector<float>(s.rows * s.in), std::vector<float>(s.in * s.out), std::vector<float>(s.out)};
  for (float& v : o.x) v = normal(rng);
  for (float& v : o.w) v = normal(rng) / w_divisor;
  for (float& v : o.bias) v = normal(rng);
  return o;
}

// The largest |y - (x·w + bias)| over the outputs, each relative to
// Σ_k |x_k w_k| + |bias|, the float64 product taken of the operands as
// operand() maps them (the identity, or a rounding the kernel applies).
template <typename Operand>
double worst_relative_error(const std::vector<float>& y, const Operands& o, const Shape& s, Operand operand) {
  double worst = 0.0;
  for (int64_t m = 0; m < s.rows; ++m)
    for (int64_t n = 0; n < s.out; ++n) {
      double ref = o.bias[n], mag = std::fabs(o.bias[n]);
      for (int64_t k = 0; k < s.in; ++k) {
        const double p = double(operand(o.x[m * s.in + k])) * double(operand(o.w[k * s.out + n]));
        ref += p, mag += std::fabs(p);
      }
      worst = std::max(worst, std::fabs(y[m * s.out + n] - ref) / (mag + 1e-30));
    }
  return worst;
}

// Integers in [-127, 127] with ±127 in every row of x and every column of w,
// so both scales are exactly 1 and quantization leaves them as they are:
// the kernel's output must then be the int32 sum itself, exactly.
TEST(PackedMatmul, Int8SumsEqualScalarInt32Arithmetic) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> value(-127, 127);
  for (const Shape& s : kShapes) {
    std::vector<float> x(s.rows * s.in), w(s.in * s.out);
    for (float& v : x) v = static_cast<float>(value(rng));
    for (float& v : w) v = static_cast<float>(value(rng));
    for (int64_t m = 0; m < s.rows; ++m) x[m * s.in + (m % s.in)] = (m % 2) ? 127.0f : -127.0f;
    for (int64_t n = 0; n < s.out; ++n) w[(n % s.in) * s.out + n] = (n % 3) ? -127.0f : 127.0f;
    const PackedLinear layer(ComputeType::kInt8, w.data(), nullptr, s.in, s.out);
    std::vector<float> y(s.rows * s.out, -1.0f);
    layer.forward(x.data(), s.rows, s.in, y.data());
    int64_t wrong = 0;
    for (int64_t m = 0; m < s.rows; ++m)
      for (int64_t n = 0; n < s.out; ++n) {
        int64_t sum = 0;
        for (int64_t k = 0; k < s.in; ++k)
          sum += static_cast<int64_t>(x[m * s.in + k]) * static_cast<int64_t>(w[k * s.out + n]);
        ASSERT_LT(std::llabs(sum), int64_t{1} << 24) << "the test's sums must be exact in float";
        if (y[m * s.out + n] != static_cast<float>(sum) && wrong++ < 3)
          ADD_FAILURE() << describe(s) << ": y[" << m << "][" << n << "] = " << y[m * s.out + n] << ", int32 sum "
                        << sum;
      }
    EXPECT_EQ(wrong, 0) << describe(s);
  }
}

// Real-valued operands: |y - x·w| is at most what rounding each operand to
// its int8 grid can cost, Σ_k (|x_k| Δw + Δx |w_k| + Δx Δw) with Δ half a
// step (scale / 2), plus float32 rounding of the result.
TEST(PackedMatmul, Int8ErrorWithinTheQuantizationBound) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Shape& s : kShapes) {
    const auto [x, w, bias] = random_operands(s, rng, normal, std::sqrt(static_cast<float>(s.in)));
    const PackedLinear layer(ComputeType::kInt8, w.data(), bias.data(), s.in, s.out);
    std::vector<float> y(s.rows * s.out);
    layer.forward(x.data(), s.rows, s.in, y.data());
    double worst = 0.0;  // the largest error as a fraction of its bound
    for (int64_t m = 0; m < s.rows; ++m) {
      double xmax = 0.0;
      for (int64_t k = 0; k < s.in; ++k) xmax = std::max(xmax, std::fabs(double(x[m * s.in + k])));
      const double dx = xmax / 127.0 / 2.0;
      for (int64_t n = 0; n < s.out; ++n) {
        double wmax = 0.0, ref = bias[n], bound = 0.0;
        for (int64_t k = 0; k < s.in; ++k) wmax = std::max(wmax, std::fabs(double(w[k * s.out + n])));
        const double dw = wmax / 127.0 / 2.0;
        for (int64_t k = 0; k < s.in; ++k) {
          const double xk = x[m * s.in + k], wk = w[k * s.out + n];
          ref += xk * wk;
          bound += std::fabs(xk) * dw + dx * std::fabs(wk) + dx * dw;
        }
        bound += 1e-6 * (std::fabs(ref) + 1.0);
        worst = std::max(worst, std::fabs(y[m * s.out + n] - ref) / bound);
      }
    }
    EXPECT_LE(worst, 1.0) << describe(s);
    if (s.in > 1) EXPECT_GT(worst, 0.0) << describe(s) << ": exact results from int8 are suspicious";
  }
}

// bf16: against the float64 product of the operands rounded to bf16 (what
// the kernel multiplies); only the float32 summation differs.
TEST(PackedMatmul, Bf16MatchesTheRoundedOperandsProduct) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto round = [](float v) { return to_float(to_bf16(v)); };
  for (const Shape& s : kShapes) {
    const Operands o = random_operands(s, rng, normal, std::sqrt(static_cast<float>(s.in)));
    const PackedLinear layer(ComputeType::kBf16, o.w.data(), o.bias.data(), s.in, s.out);
    std::vector<float> y(s.rows * s.out);
    layer.forward(o.x.data(), s.rows, s.in, y.data());
    const double worst = worst_relative_error(y, o, s, round);
    EXPECT_LE(worst, 1e-6) << describe(s) << ": error beyond 1e-6 of Σ|x·w|";
  }
}

// float32 in panels (decoding's prepared weights) gives the bits of the
// row-major product (float32_view: the op-by-op path and a model in
// training read the weights where they are), and both are within float32
// rounding of the float64 product: every shape's partial panel, leftover
// vectors and leftover rows.
TEST(PackedMatmul, Float32PanelsGiveTheRowMajorBits) {
  std::mt19937 rng(15);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Shape& s : kShapes) {
    const Operands o = random_operands(s, rng, normal, 1.0f);
    const PackedLinear packed(ComputeType::kFloat32, o.w.data(), o.bias.data(), s.in, s.out);
    const PackedLinear view = PackedLinear::float32_view(o.w.data(), o.bias.data(), s.in, s.out);
    std::vector<float> a(s.rows * s.out, -1.0f), b(s.rows * s.out, -2.0f);
    packed.forward(o.x.data(), s.rows, s.in, a.data());
    view.forward(o.x.data(), s.rows, s.in, b.data());
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << describe(s);
    const double worst = worst_relative_error(a, o, s, [](float v) { return v; });
    EXPECT_LE(worst, 1e-6 * std::sqrt(static_cast<double>(s.in))) << describe(s);
  }
}

// A row's result is bit for bit the same alone or among others, from a
// strided x: each sentence's translation stays independent of its batch.
TEST(PackedMatmul, ARowDoesNotDependOnItsCompany) {
  std::mt19937 rng(14);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 13, stride = 300, in = 256, out = 600;
  std::vector<float> x(rows * stride), w(in * out), bias(out);
  for (float& v : x) v = normal(rng);
  for (float& v : w) v = normal(rng) / 16.0f;
  for (float& v : bias) v = normal(rng);
  for (ComputeType type : {ComputeType::kFloat32, ComputeType::kBf16, ComputeType::kInt8}) {
    const PackedLinear layer(type, w.data(), bias.data(), in, out);
    std::vector<float> all(rows * out), one(out);
    layer.forward(x.data() + 20, rows, stride, all.data());
    for (int64_t r = 0; r < rows; ++r) {
      layer.forward(x.data() + r * stride + 20, 1, stride, one.data());
      EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + r * out))
          << compute_type_name(type) << ", row " << r << " (" << isa_name(kernel_isa()) << ")";
    }
  }
}

// A row holding a non-finite value gives NaN outputs (as float32's product
// would give non-finite ones), a row of zeros gives the bias, and neither
// touches its neighbours.
TEST(PackedMatmul, Int8NonFiniteAndZeroRows) {
  const int64_t in = 40, out = 70;
  std::vector<float> w(in * out), bias(out), x(3 * in);
  for (int64_t i = 0; i < in * out; ++i) w[i] = std::sin(0.37f * static_cast<float>(i));
  for (int64_t n = 0; n < out; ++n) bias[n] = 0.25f * static_cast<float>(n % 5);
  for (int64_t k = 0; k < in; ++k) x[k] = std::cos(0.11f * static_cast<float>(k)), x[2 * in + k] = x[k];
  x[in + 7] = std::numeric_limits<float>::infinity();  // row 1: inf; row 2 = row 0
  const PackedLinear layer(ComputeType::kInt8, w.data(), bias.data(), in, out);
  std::vector<float> y(3 * out);
  layer.forward(x.data(), 3, in, y.data());
  for (int64_t n = 0; n < out; ++n) {
    EXPECT_TRUE(std::isnan(y[out + n])) << "column " << n;
    EXPECT_EQ(y[n], y[2 * out + n]) << "column " << n;
    EXPECT_TRUE(std::isfinite(y[n]));
  }
  std::vector<float> zeros(in, 0.0f), z(out);
  layer.forward(zeros.data(), 1, in, z.data());
  for (int64_t n = 0; n < out; ++n) EXPECT_EQ(z[n], bias[n]) << "column " << n;
}

TEST(PackedMatmul, ComputeTypeNames) {
  for (ComputeType t : {ComputeType::kFloat32, ComputeType::kBf16, ComputeType::kInt8})
    EXPECT_EQ(parse_compute_type(compute_type_name(t)), t);
  EXPECT_FALSE(parse_compute_type("auto").has_value());
  EXPECT_FALSE(resolve_compute_type("int4").has_value());
  EXPECT_FALSE(resolve_compute_type("").has_value());
  ASSERT_TRUE(resolve_compute_type("auto").has_value());
  EXPECT_EQ(*resolve_compute_type("auto"), kernel_isa() >= CpuIsa::kAvx2 ? ComputeType::kInt8 : ComputeType::kFloat32);
  // The packed sizes: a quarter and a half of float32's (whole panels).
  std::vector<float> w(256 * 768, 0.5f);
  EXPECT_EQ(PackedLinear(ComputeType::kFloat32, w.data(), nullptr, 256, 768).weight_bytes(), 256 * 768 * 4);
  EXPECT_EQ(PackedLinear(ComputeType::kFloat32, w.data(), nullptr, 256, 700).weight_bytes(), 256 * 704 * 4);
  EXPECT_EQ(PackedLinear::float32_view(w.data(), nullptr, 256, 700).weight_bytes(), 256 * 700 * 4);
  EXPECT_EQ(PackedLinear(ComputeType::kBf16, w.data(), nullptr, 256, 768).weight_bytes(), 256 * 768 * 2);
  EXPECT_EQ(PackedLinear(ComputeType::kInt8, w.data(), nullptr, 256, 768).weight_bytes(), 256 * 768);
}

}  // namespace
}  // namespace nmt::ops
