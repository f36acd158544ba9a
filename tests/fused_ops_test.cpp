// The fused CPU ops against their unfused LibTorch composites (the
// *_reference functions, differentiated by LibTorch's autograd), forward and
// backward, in float64 (tolerance 1e-10), float32 and with bf16 matrix-side
// tensors; the counter-based dropout against published Philox vectors and an
// independent ATen implementation; Adam over flat buffers against
// torch::optim::Adam. Sizes include odd ones (C = 1, 3, 257; one row).
#include <gtest/gtest.h>
#include <torch/optim/adam.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "ops/activation/bias_relu_dropout.h"
#include "ops/adam/flat_adam.h"
#include "ops/attention/attention.h"
#include "ops/cross_entropy/linear_cross_entropy.h"
#include "ops/embedding/embedding.h"
#include "ops/layer_norm/add_layer_norm.h"
#include "ops/linear/cpu/float_gemm.h"
#include "ops/linear/cpu/onednn_gemm.h"
#include "ops/linear/cpu/peak_cpu.h"
#include "ops/linear/cpu/sgemm_cpu.h"
#include "ops/linear/dense.h"
#include "ops/linear/rows_matmul.h"
#include "ops/op_glue.h"
#include "ops/random/dropout.h"
#include "ops/random/philox.h"
#include "support/temp_dir.h"
#include "util/errors.h"

namespace nmt::ops {
namespace {

// max |a - b| / max(1, max |b|), on the CPU whatever the devices
double error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor bd = b.to(at::kCPU, at::kDouble);
  return (a.to(at::kCPU, at::kDouble) - bd).abs().max().item<double>() /
         std::max(1.0, bd.abs().max().item<double>());
}

// The bar, as in attention_test.cpp: float64 within 1e-10 of the float64
// composite; otherwise at most twice as far from it as LibTorch's own
// composite run in the same dtypes, plus a small absolute term.
void expect_close(const at::Tensor& fused, const at::Tensor& same_dtype_ref, const at::Tensor& ref64,
                  at::ScalarType side, const std::string& what) {
  const double err = error(fused, ref64);
  if (side == at::kDouble) {
    EXPECT_LT(err, 1e-10) << what;
    return;
  }
  const double torch_err = error(same_dtype_ref, ref64);
  EXPECT_LE(err, 2 * torch_err + (side == at::kFloat ? 1e-6 : 1e-3))
      << what << " (LibTorch's own error " << torch_err << ")";
}

Dropout dropout(double p, int64_t site = 3, int64_t step = 17, int64_t first_row = 0) {
  Dropout d;
  d.p = p, d.seed = 0x0123456789abcdefull, d.step = step, d.site = site, d.first_row = first_row;
  return d;
}

// ----------------------------------------------------------------- Philox

TEST(Philox, KnownAnswerVectors) {
  // Random123's kat_vectors for philox4x32_10.
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    uint32_t c0 = k.ctr[0], c1 = k.ctr[1], c2 = k.ctr[2], c3 = k.ctr[3];
    philox::rounds(c0, c1, c2, c3, k.key[0], k.key[1]);
    EXPECT_EQ(c0, k.out[0]);
    EXPECT_EQ(c1, k.out[1]);
    EXPECT_EQ(c2, k.out[2]);
    EXPECT_EQ(c3, k.out[3]);
  }
}

TEST(Philox, VectorizedMaskRowsEqualScalarWords) {
  const philox::DropoutStream s = dropout(0.3).stream();
  for (int64_t n : {1, 3, 4, 17, 63, 64, 65, 130, 257}) {
    std::vector<double> row(n);
    philox::mask_row<double>(s, 5, 9, n, row.data());
    const uint32_t threshold = philox::keep_threshold(s.p);
    for (int64_t c = 0; c < n; ++c) {
      uint32_t w[4];
      philox::words(s, 5, 9, philox::counter_of(c), w);
      EXPECT_EQ(row[c] != 0, w[philox::word_of(c)] >= threshold) << "n " << n << " c " << c;
    }
  }
}

// ----------------------------------------------------------------- dropout masks

// The multipliers the fused kernel draws, read through add_layer_norm's sum
// output with x = 0 and y = 1.
at::Tensor kernel_multipliers(const Dropout& d, int64_t b, int64_t t, int64_t c) {
  const auto opts = at::TensorOptions(at::kDouble);
  return add_layer_norm(at::zeros({b, t, c}, opts), at::ones({b, t, c}, opts), at::ones({c}, opts),
                        at::zeros({c}, opts), 1e-5, d, at::kDouble)
      .sum;
}

TEST(Dropout, KernelMasksEqualTheAtenImplementation) {
  for (const double p : {0.1, 0.5, 0.9}) {
    const Dropout d = dropout(p, 7, 123456, 11);
    const at::Tensor aten = dropout_multipliers(d, 3, 5, 37, at::kDouble);
    EXPECT_TRUE(kernel_multipliers(d, 3, 5, 37).equal(aten)) << "p " << p;
  }
}

TEST(Dropout, KeepRateAndIndependence) {
  const Dropout d = dropout(0.1);
  const at::Tensor m = dropout_multipliers(d, 64, 50, 256, at::kDouble);
  const double kept = (m > 0).to(at::kDouble).mean().item<double>();
  const double sigma = std::sqrt(0.1 * 0.9 / m.numel());
  EXPECT_NEAR(kept, 0.9, 5 * sigma);
  EXPECT_NEAR(m.mean().item<double>(), 1.0, 6 * sigma / 0.9);  // E[mask] = 1
  EXPECT_TRUE(((m == 0) | (m == 1.0 / (1.0 - static_cast<double>(static_cast<float>(0.1))))).all().item<bool>());
  // Every coordinate matters: other steps, sites, seeds give other masks.
  for (const Dropout& other : {dropout(0.1, 3, 18), dropout(0.1, 4, 17)}) {
    const at::Tensor o = dropout_multipliers(other, 64, 50, 256, at::kDouble);
    const double agree = ((o > 0) == (m > 0)).to(at::kDouble).mean().item<double>();
    EXPECT_NEAR(agree, 0.9 * 0.9 + 0.1 * 0.1, 0.01);  // as independent masks agree
  }
}

TEST(Dropout, MasksDependOnGlobalCoordinatesNotOnPaddingOrRanks) {
  const Dropout d = dropout(0.4);
  const at::Tensor full = dropout_multipliers(d, 6, 9, 40, at::kDouble);
  // A longer (padded) batch: the same values in the first 9 positions.
  EXPECT_TRUE(kernel_multipliers(d, 6, 13, 40).narrow(1, 0, 9).equal(full));
  // Rows 4..5 held by another rank, whose row 0 is global row 4.
  EXPECT_TRUE(kernel_multipliers(dropout(0.4, 3, 17, 4), 2, 9, 40).equal(full.narrow(0, 4, 2)));
}

// Rows of sentences packed one after another (Dropout::row_starts, the
// training encoder's) draw the padded rows' masks, in the add+LayerNorm and
// bias+ReLU+dropout kernels, forward and backward: empty sentences, rows of
// several threads' chunks. (s = 0 + 1 · m and relu(1 + 0) · m are the masks.)
TEST(Dropout, PackedRowsDrawThePaddedRowsMasks) {
  const std::vector<int64_t> len{5, 0, 3, 7, 0, 40};
  const int64_t B = static_cast<int64_t>(len.size()), T = 40, C = 70;
  for (const double p : {0.4, 0.0}) {
    Dropout d = dropout(p, 5, 11, 2);
    const at::Tensor full = dropout_multipliers(d, B, T, C, at::kFloat);  // [B, T, C]
    std::vector<at::Tensor> rows;
    for (int64_t b = 0; b < B; ++b) rows.push_back(full[b].narrow(0, 0, len[b]));
    const at::Tensor want = at::cat(rows).unsqueeze(0);  // [1, N, C]
    const int64_t N = want.size(1);
    d.row_starts = packed_starts(at::tensor(len, at::kLong));
    const at::Tensor x = at::zeros({1, N, C}), y = at::ones({1, N, C}).requires_grad_(true);
    const at::Tensor s = add_layer_norm(x, y, at::ones({C}), at::zeros({C}), 1e-5, d, at::kFloat).sum;
    EXPECT_TRUE(s.detach().equal(want)) << "add_layer_norm p=" << p;
    s.sum().backward();  // dy = ds · m
    EXPECT_TRUE(y.grad().equal(want)) << "add_layer_norm backward p=" << p;
    const at::Tensor h = at::ones({1, N, C});
    EXPECT_TRUE(bias_relu_dropout(h, at::zeros({C}), d).equal(want)) << "bias_relu_dropout p=" << p;
  }
}

// On a GPU, float32 and bf16 multipliers come from one CUDA kernel: the same
// values as the ATen implementation on the CPU, element for element (channel
// counts off the 64-channel grid, rows beyond grid.y's 65535, p near 1).
TEST(Dropout, CudaKernelEqualsTheAtenImplementation) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "CUDA is not available here";
#ifndef NMT_WITH_CUDA
  GTEST_SKIP() << "this build has no CUDA kernels";
#endif
  struct Case {
    int64_t b, t, c;
    double p;
  };
  for (const Case& k : {Case{3, 5, 37, 0.1}, Case{4, 33, 256, 0.3}, Case{2, 7, 1030, 0.9},
                        Case{70, 1000, 9, 0.5}}) {
    const Dropout d = dropout(k.p, 7, 123456, 11);
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
      const at::Tensor cpu = dropout_multipliers(d, k.b, k.t, k.c, at::TensorOptions(dtype));
      const at::Tensor gpu =
          dropout_multipliers(d, k.b, k.t, k.c, at::TensorOptions(dtype).device(at::kCUDA)).cpu();
      EXPECT_TRUE(gpu.equal(cpu)) << k.b << "x" << k.t << "x" << k.c << " p " << k.p << " " << dtype;
    }
  }
}

// ----------------------------------------------------------------- fused ops

struct SideCase {
  at::ScalarType stream, side;  // residual-stream dtype, matrix-side dtype
};
const SideCase kSides[] = {{at::kDouble, at::kDouble}, {at::kFloat, at::kFloat}, {at::kFloat, at::kBFloat16}};

std::string name(const SideCase& s) { return std::string(c10::toString(s.stream)) + "/" + c10::toString(s.side); }

// Inputs are made in float64 and rounded once, so both sides see the same values.
at::Tensor leaf(at::IntArrayRef shape, at::ScalarType dtype, double scale = 1.0) {
  return (at::randn(shape, at::kDouble) * scale).to(dtype).requires_grad_(true);
}

// Reference inputs: the same values, in the stream dtype (float64 for bf16 sides too).
at::Tensor ref_leaf(const at::Tensor& t, at::ScalarType dtype, c10::DeviceType device = c10::kCPU) {
  return t.detach().to(device, dtype).requires_grad_(true);
}

// One case run three ways: fused in its dtypes, the composite in the same
// dtypes, and the composite in float64 from the same (rounded) inputs.
struct Pass {
  std::vector<at::Tensor> inputs;   // leaves
  std::vector<at::Tensor> outputs;  // outputs to compare, then backward through
};

// Backward through sum(output_i * up_i) with the same random up_i for every run.
void backward(Pass& r, const std::vector<at::Tensor>& ups) {
  at::Tensor total = at::zeros({}, at::kDouble);
  for (size_t i = 0; i < r.outputs.size(); ++i)
    if (r.outputs[i].defined()) total = total + (r.outputs[i].to(at::kCPU, at::kDouble) * ups[i]).sum();
  total.backward();
}

void compare_runs(Pass& fused, Pass& same, Pass& ref64, at::ScalarType side, const std::string& what) {
  std::vector<at::Tensor> ups;
  for (const auto& o : ref64.outputs) ups.push_back(o.defined() ? at::randn(o.sizes(), at::kDouble) : at::Tensor());
  for (size_t i = 0; i < fused.outputs.size(); ++i)
    if (fused.outputs[i].defined())
      expect_close(fused.outputs[i], same.outputs[i], ref64.outputs[i], side, what + " output " + std::to_string(i));
  backward(fused, ups);
  backward(same, ups);
  backward(ref64, ups);
  for (size_t i = 0; i < fused.inputs.size(); ++i)
    if (fused.inputs[i].grad().defined() || ref64.inputs[i].grad().defined())
      expect_close(fused.inputs[i].grad(), same.inputs[i].grad(), ref64.inputs[i].grad(), side,
                   what + " gradient of input " + std::to_string(i));
}

// Leaves with the values of `like` in another dtype (and on another device).
std::vector<at::Tensor> recast(const std::vector<at::Tensor>& like, const std::vector<at::ScalarType>& dtypes,
                               c10::DeviceType device = c10::kCPU) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < like.size(); ++i) out.push_back(ref_leaf(like[i], dtypes[i], device));
  return out;
}

// y, y + a bias (the bias of the product y is, added by the op), or no y.
enum class YCase { kNone, kY, kYAndBias };

TEST(AddLayerNorm, MatchesTheCompositeForwardAndBackward) {
  at::manual_seed(1);
  for (const SideCase& sc : kSides)
    for (const int64_t C : {1, 3, 64, 257})
      for (const YCase yc : {YCase::kYAndBias, YCase::kY, YCase::kNone})
        for (const double p : {0.0, 0.25}) {
          const int64_t B = 3, T = 5;
          const Dropout d = dropout(p);
          const bool with_y = yc != YCase::kNone, with_bias = yc == YCase::kYAndBias;
          const auto make = [&](std::vector<at::Tensor> in, at::ScalarType side, bool fused) {
            const auto f = fused ? add_layer_norm : add_layer_norm_reference;
            const auto o = f(in[0], with_y ? in[1] : at::Tensor(), in[2], in[3], 1e-5, d, side,
                             with_bias ? in[4] : at::Tensor());
            return Pass{in, {o.sum, o.norm}};
          };
          std::vector<at::Tensor> in{leaf({B, T, C}, sc.stream), leaf({B, T, C}, sc.side),
                                     leaf({C}, sc.stream), leaf({C}, sc.stream), leaf({C}, sc.stream)};
          const std::vector<at::ScalarType> types{sc.stream, sc.side, sc.stream, sc.stream, sc.stream};
          Pass fused = make(in, sc.side, true);
          Pass same = make(recast(in, types), sc.side, false);
          Pass ref64 = make(recast(in, std::vector<at::ScalarType>(5, at::kDouble)), at::kDouble, false);
          compare_runs(fused, same, ref64, sc.side,
                       name(sc) + " C=" + std::to_string(C) + (with_y ? " y" : "") + (with_bias ? "+bias" : "") +
                           " p=" + std::to_string(p));
          EXPECT_EQ(fused.inputs[4].grad().defined(), with_bias) << name(sc) << " C=" << C << ": y's bias";
        }
}

TEST(AddLayerNorm, UnusedSumGetsNoGradient) {
  // The last block's sum feeds only the final norm: its gradient is undefined.
  at::Tensor x = leaf({2, 3, 8}, at::kDouble), y = leaf({2, 3, 8}, at::kDouble);
  at::Tensor g = leaf({8}, at::kDouble), b = leaf({8}, at::kDouble);
  const auto out = add_layer_norm(x, y, g, b, 1e-5, dropout(0.1), at::kDouble);
  out.norm.pow(2).sum().backward();
  at::Tensor rx = ref_leaf(x, at::kDouble), ry = ref_leaf(y, at::kDouble);
  add_layer_norm_reference(rx, ry, g.detach(), b.detach(), 1e-5, dropout(0.1), at::kDouble).norm.pow(2).sum().backward();
  EXPECT_LT(error(x.grad(), rx.grad()), 1e-10);
  EXPECT_LT(error(y.grad(), ry.grad()), 1e-10);
}

// The decoding step's matrix product: every row count up to the model's
// threshold, widths with and without a partial last tile, against float64.
TEST(RowsMatmul, MatchesTheFloat64Reference) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  for (int64_t m : {1, 2, 3, 5, 6, 7, 13, 48})
    for (int64_t k : {1, 37, 256})
      for (int64_t n : {1, 15, 64, 65, 200, 768})
        for (bool with_bias : {false, true}) {
          const auto x = torch::randn({m, k}), w = torch::randn({k, n}) / std::sqrt(double(k));
          const auto b = with_bias ? torch::randn({n}) : torch::Tensor();
          const auto y = rows_matmul(x, w, b);
          const auto ref = rows_matmul_reference(x, w, b);
          ASSERT_EQ(y.sizes(), ref.sizes());
          const double err = (y.to(torch::kDouble) - ref).abs().max().item<double>();
          EXPECT_LT(err, 1e-5 * std::sqrt(double(k)) + 1e-6) << m << "x" << k << " · " << k << "x" << n
                                                             << (with_bias ? " + bias" : "");
        }
}

// A row's result is bit for bit the same alone or among others (and from a
// strided x): a sentence's translation does not depend on its batch.
TEST(RowsMatmul, ARowDoesNotDependOnItsCompany) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(8);
  const auto wide = torch::randn({13, 300}), w = torch::randn({256, 6000}) / 16, b = torch::randn({6000});
  const auto x = wide.narrow(1, 20, 256);  // row stride 300
  ASSERT_TRUE(rows_matmul_applies(x, w));
  const auto all = rows_matmul(x, w, b);
  for (int64_t r = 0; r < 13; ++r) {
    EXPECT_TRUE(torch::equal(rows_matmul(x.narrow(0, r, 1), w, b), all.narrow(0, r, 1))) << "row " << r;
    EXPECT_TRUE(torch::equal(rows_matmul(x.narrow(0, 0, r + 1), w, b), all.narrow(0, 0, r + 1))) << "rows 0.." << r;
  }
  EXPECT_LT((all.to(torch::kDouble) - rows_matmul_reference(x, w, b)).abs().max().item<double>(), 1e-4);
}

TEST(RowsMatmul, OnlyForInferenceOnFloatCpuTensors) {
  const auto x = torch::randn({4, 8}), w = torch::randn({8, 16});
  EXPECT_FALSE(rows_matmul_applies(x, w));  // gradients wanted (the default mode)
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(rows_matmul_applies(x, w));
  EXPECT_FALSE(rows_matmul_applies(x.to(torch::kDouble), w.to(torch::kDouble)));
  EXPECT_FALSE(rows_matmul_applies(x, w.t().contiguous().t()));  // w not row-major
  EXPECT_FALSE(rows_matmul_applies(x.t(), torch::randn({4, 16})));  // x columns strided
}

TEST(BiasReluDropout, MatchesTheCompositeForwardAndBackward) {
  at::manual_seed(2);
  for (const SideCase& sc : kSides)
    for (const int64_t F : {1, 3, 96, 257})
      for (const double p : {0.0, 0.3}) {
        const Dropout d = dropout(p, 9);
        const auto make = [&](std::vector<at::Tensor> in, bool fused) {
          return Pass{in, {(fused ? bias_relu_dropout : bias_relu_dropout_reference)(in[0], in[1], d)}};
        };
        std::vector<at::Tensor> in{leaf({2, 7, F}, sc.side), leaf({F}, sc.stream)};
        Pass fused = make(in, true);
        EXPECT_EQ(fused.outputs[0].scalar_type(), sc.side);
        Pass same = make(recast(in, {sc.side, sc.stream}), false);
        Pass ref64 = make(recast(in, {at::kDouble, at::kDouble}), false);
        compare_runs(fused, same, ref64, sc.side, name(sc) + " F=" + std::to_string(F) + " p=" + std::to_string(p));
      }
}

TEST(Embedding, MatchesTheCompositeForwardAndBackward) {
  at::manual_seed(3);
  for (const at::ScalarType dt : {at::kDouble, at::kFloat})
    for (const int64_t C : {1, 3, 64})
      for (const double p : {0.0, 0.2}) {
        const int64_t V = 11, B = 3, T = 6, offset = 2;
        at::Tensor ids = at::randint(0, V, {B, T}, at::kLong);
        ids[0][5] = 0;  // padding
        ids[2][1] = 0;
        at::Tensor table = leaf({V, C}, dt), rtable = ref_leaf(table, dt);
        const at::Tensor pos = at::randn({T + offset, C}, at::kDouble).to(dt);
        const Dropout d = dropout(p, 1);
        const at::Tensor out = embed_tokens(ids, table, pos, offset, 1.7, 0, d);
        const at::Tensor ref = embed_tokens_reference(ids, rtable, pos, offset, 1.7, 0, d);
        const double tol = dt == at::kDouble ? 1e-10 : 1e-6;  // no reductions: exact up to rounding
        EXPECT_LT(error(out, ref), tol);
        const at::Tensor up = at::randn({B, T, C}, at::kDouble).to(dt);
        (out * up).sum().backward();
        (ref * up).sum().backward();
        EXPECT_LT(error(table.grad(), rtable.grad()), tol);
        EXPECT_EQ(table.grad()[0].abs().max().item<double>(), 0.0);  // the padding row
        // With a gradient buffer of its own holding something already (the
        // optimizer's flat one, as gradients accumulate): the rows land in
        // it, in place, and nowhere else.
        at::Tensor buffer = at::randn({V * C + 8}, dt), btable = ref_leaf(table, dt);
        const at::Tensor before = buffer.clone();
        btable.mutable_grad() = buffer.narrow(0, 8, V * C).view({V, C});
        (embed_tokens(ids, btable, pos, offset, 1.7, 0, d) * up).sum().backward();
        EXPECT_EQ(btable.grad().data_ptr(), static_cast<char*>(buffer.data_ptr()) + 8 * buffer.element_size());
        EXPECT_TRUE(buffer.narrow(0, 0, 8).equal(before.narrow(0, 0, 8)));
        EXPECT_LT(error(buffer.narrow(0, 8, V * C).view({V, C}) - before.narrow(0, 8, V * C).view({V, C}),
                        rtable.grad()),
                  tol);
      }
}

// On one thread (a decoding worker's) the ops run without an OpenMP team
// (ops/cpu_parallel.h); every row must still be computed, as a team of
// threads computes it: bit for bit the same forward results.
TEST(OneThread, EveryForwardOpGivesTheTeamsResult) {
  torch::NoGradGuard no_grad;
  at::manual_seed(12);
  const int threads = at::get_num_threads();
  const int64_t B = 5, T = 37, C = 64, H = 4, F = 256, V = 50;
  const at::Tensor ids = at::randint(1, V, {B, T}, at::kLong), table = at::randn({V, C}),
                   pos = at::randn({T + 3, C}), x = at::randn({B, T, C}), y = at::randn({B, T, C}),
                   gamma = at::randn({C}), beta = at::randn({C}), h = at::randn({B, T, F}), bias = at::randn({F}),
                   w = at::randn({C, 6000}) / 8, wb = at::randn({6000}), q = at::randn({B, H, T, C / H}),
                   k = at::randn({B, H, T + 9, C / H}), v = at::randn({B, H, T + 9, C / H});
  const Dropout d = dropout(0.2, 5);
  AttentionOptions lengths;
  lengths.key_lengths = at::tensor({46, 3, 0, 20, 46}, at::kLong);
  AttentionOptions causal;
  causal.causal = true;
  const auto run = [&] {
    return std::vector<at::Tensor>{
        embed_tokens(ids, table, pos, 3, 1.5, 0, d),
        add_layer_norm(x, y, gamma, beta, 1e-5, d, at::kFloat).norm,
        bias_relu_dropout(h, bias, d),
        rows_matmul(x.reshape({B * T, C}), w, wb),
        attention_flash_cpu(q.narrow(2, 0, 1), k, v, lengths),  // decoding: one query row
        attention_flash_cpu(q, k, v, lengths),                   // query blocks
        attention_flash_cpu(q, q, q, causal)};
  };
  at::set_num_threads(1);
  const std::vector<at::Tensor> alone = run();
  at::set_num_threads(std::max(threads, 3));
  const std::vector<at::Tensor> team = run();
  at::set_num_threads(threads);
  const char* names[] = {"embedding", "add_layer_norm", "bias_relu_dropout", "rows_matmul", "attention, one row",
                         "attention, blocks", "attention, causal"};
  for (size_t i = 0; i < team.size(); ++i) EXPECT_TRUE(torch::equal(alone[i], team[i])) << names[i];
}

TEST(LinearCrossEntropy, MatchesTheCompositeOverSeveralChunks) {
  at::manual_seed(4);
  // V large enough that 150 rows take several chunks, the last one partial.
  const int64_t V = 20000, C = 5, N = 150;
  ASSERT_LT(cross_entropy_chunk_rows(V), N);
  at::Tensor labels = at::randint(0, V, {N}, at::kLong);
  labels[3] = 0, labels[17] = 0;  // ignored rows
  for (const SideCase& sc : kSides)
    for (const bool with_bias : {false, true})
      for (const double smoothing : {0.0, 0.1}) {
        const auto make = [&](std::vector<at::Tensor> in, bool fused) {
          const at::Tensor b = with_bias ? in[2] : at::Tensor();
          const at::Tensor loss = fused ? linear_cross_entropy(in[0], in[1], b, labels, smoothing, 0)
                                        : linear_cross_entropy_reference(in[0], in[1], b, labels, smoothing, 0);
          return Pass{in, {loss * 0.37}};
        };
        std::vector<at::Tensor> in{leaf({N, C}, sc.side), leaf({V, C}, sc.stream, 0.5), leaf({V}, sc.stream)};
        Pass fused = make(in, true);
        Pass same = make(recast(in, {sc.side, sc.stream, sc.stream}), false);
        Pass ref64 = make(recast(in, {at::kDouble, at::kDouble, at::kDouble}), false);
        compare_runs(fused, same, ref64, sc.side,
                     name(sc) + (with_bias ? " bias" : "") + " e=" + std::to_string(smoothing));
      }
}

// The loss without smoothing, from the same pass (the training chart's
// train_nll): the smoothing-0 loss of a float64 reference, not differentiable.
TEST(LinearCrossEntropy, UnsmoothedSumComesFromTheSamePass) {
  at::manual_seed(5);
  const int64_t V = 20000, C = 5, N = 150;
  at::Tensor labels = at::randint(0, V, {N}, at::kLong);
  labels[7] = 0;
  for (const SideCase& sc : kSides) {
    const at::Tensor h = leaf({N, C}, sc.side), w = leaf({V, C}, sc.stream, 0.5), b = leaf({V}, sc.stream);
    at::Tensor nll;
    const at::Tensor loss = linear_cross_entropy(h, w, b, labels, 0.1, 0, &nll);
    const at::Tensor ref = linear_cross_entropy_reference(h.detach().to(at::kDouble), w.detach().to(at::kDouble),
                                                          b.detach().to(at::kDouble), labels, 0.0, 0);
    const double tol = sc.side == at::kBFloat16 ? 2e-2 : sc.side == at::kFloat ? 1e-5 : 1e-12;
    EXPECT_LT(std::abs(nll.item<double>() - ref.item<double>()) / ref.item<double>(), tol) << name(sc);
    EXPECT_FALSE(nll.requires_grad()) << name(sc);
    loss.backward();  // the unsmoothed sum takes no part in the gradient
    // Without smoothing, the two are one number.
    at::Tensor same;
    const at::Tensor plain = linear_cross_entropy(h, w, b, labels, 0.0, 0, &same);
    EXPECT_EQ(plain.item<double>(), same.item<double>()) << name(sc);
  }
}

TEST(LinearCrossEntropy, IgnoredRowsAndNoGradMode) {
  at::Tensor h = leaf({4, 3}, at::kDouble), w = leaf({7, 3}, at::kDouble);
  const at::Tensor pad = at::zeros({4}, at::kLong);
  const at::Tensor loss = linear_cross_entropy(h, w, at::Tensor(), pad, 0.1, 0);
  EXPECT_EQ(loss.item<double>(), 0.0);
  loss.backward();
  EXPECT_EQ(h.grad().abs().max().item<double>(), 0.0);
  EXPECT_EQ(w.grad().abs().max().item<double>(), 0.0);
  const at::Tensor labels = at::tensor({1, 2, 0, 6}, at::kLong);
  at::NoGradGuard no_grad;
  EXPECT_LT(error(linear_cross_entropy(h, w, at::Tensor(), labels, 0.1, 0),
                  linear_cross_entropy_reference(h, w, at::Tensor(), labels, 0.1, 0)),
            1e-12);
}

// A float32 weight whose gradient is a buffer of its own (the optimizer's
// flat one, holding what earlier uses added) gets dW * scale added into that
// buffer, in place; with the weight also used elsewhere (tied to an
// embedding), both contributions end up there.
TEST(LinearCrossEntropy, AddsItsWeightGradientIntoTheBuffer) {
  at::manual_seed(27);
  const int64_t V = 9000, C = 6, N = 150;  // several chunks, the last one partial
  const at::Tensor labels = at::randint(1, V, {N}, at::kLong);
  for (const at::ScalarType side : {at::kFloat, at::kBFloat16})
    for (const bool tied : {false, true}) {
      const std::string what = std::string(c10::toString(side)) + (tied ? " tied" : "");
      const at::Tensor h0 = at::randn({N, C}, at::kDouble), w0 = at::randn({V, C}, at::kDouble) * 0.5;
      const at::Tensor other_up = at::randn({V, C}, at::kDouble);
      const auto run = [&](at::ScalarType h_dtype, at::ScalarType w_dtype, at::Tensor* buffer) {
        at::Tensor h = h0.to(h_dtype).requires_grad_(true), w = w0.to(w_dtype).requires_grad_(true);
        if (buffer) w.mutable_grad() = buffer->narrow(0, 16, V * C).view({V, C});
        at::Tensor loss = linear_cross_entropy(h, w, at::Tensor(), labels, 0.1, 0) * 0.37;
        if (tied) loss = loss + (w.to(at::kDouble) * other_up).sum();
        loss.backward();
        return w.grad();
      };
      at::Tensor buffer = at::randn({V * C + 16}, at::kFloat);
      const at::Tensor before = buffer.clone();
      const at::Tensor grad = run(side, at::kFloat, &buffer);
      EXPECT_EQ(grad.data_ptr(), buffer.data_ptr<float>() + 16) << what << ": the buffer was replaced";
      EXPECT_TRUE(buffer.narrow(0, 0, 16).equal(before.narrow(0, 0, 16))) << what << ": written outside the view";
      const at::Tensor added = buffer.narrow(0, 16, V * C).view({V, C}) - before.narrow(0, 16, V * C).view({V, C});
      const at::Tensor same = run(side, at::kFloat, nullptr);  // handed to autograd
      const at::Tensor ref64 = run(at::kDouble, at::kDouble, nullptr);
      expect_close(added, same, ref64, side, what + " dW into the buffer");
    }
}

// ----------------------------------------------------------------- Adam

TEST(FlatAdam, MatchesTorchOptimAdamAndAutogradFillsTheFlatGradients) {
  for (const double wd : {0.0, 0.01}) {
    at::manual_seed(5);
    torch::nn::Linear a(torch::nn::LinearOptions(7, 5)), b(torch::nn::LinearOptions(5, 3));
    a->to(at::kDouble), b->to(at::kDouble);
    torch::nn::Linear ra(torch::nn::LinearOptions(7, 5)), rb(torch::nn::LinearOptions(5, 3));
    ra->to(at::kDouble), rb->to(at::kDouble);
    {
      at::NoGradGuard no_grad;
      ra->weight.copy_(a->weight), ra->bias.copy_(a->bias), rb->weight.copy_(b->weight), rb->bias.copy_(b->bias);
    }
    std::vector<at::Tensor> params{a->weight, a->bias, b->weight, b->bias};
    std::vector<at::Tensor> ref_params{ra->weight, ra->bias, rb->weight, rb->bias};
    AdamHyper hyper{0.9, 0.98, 1e-9, wd};
    FlatAdam flat(params, hyper);
    torch::optim::Adam ref(ref_params, torch::optim::AdamOptions(1e-2).betas({0.9, 0.98}).eps(1e-9).weight_decay(wd));
    for (int step = 1; step <= 6; ++step) {
      const at::Tensor x = at::randn({9, 7}, at::kDouble);
      flat.zero_grad();
      ref.zero_grad();
      b(at::tanh(a(x))).pow(2).sum().backward();
      rb(at::tanh(ra(x))).pow(2).sum().backward();
      for (size_t i = 0; i < params.size(); ++i)
        EXPECT_LT(error(params[i].grad(), ref_params[i].grad()), 1e-12) << "grad " << i;
      // Clipping: the same factor both ways.
      const double scale = step % 2 ? 1.0 : 0.5;
      for (auto& p : ref_params) p.mutable_grad().mul_(scale);
      double sq = 0;
      for (auto& p : ref_params) sq += p.grad().pow(2).sum().item<double>();
      EXPECT_NEAR(flat.grad_norm().item<double>() * scale, std::sqrt(sq), 1e-12);
      flat.step(1e-2, at::scalar_tensor(scale, at::kDouble));
      ref.step();
      for (size_t i = 0; i < params.size(); ++i)
        EXPECT_LT(error(params[i], ref_params[i]), 1e-12) << "step " << step << " param " << i << " wd " << wd;
    }
    // The moments survive a save and load.
    const std::string path = testing::temp_dir("flat_adam") + "/flat_adam.pt";
    flat.save(path);
    FlatAdam again(std::vector<at::Tensor>{a->weight.detach().clone(), a->bias.detach().clone(),
                                           b->weight.detach().clone(), b->bias.detach().clone()},
                   hyper);
    again.load(path);
    EXPECT_EQ(again.steps(), 6);
  }
}

// The weights' moving average against its closed form: after steps 1..n
// with weights w_1..w_n from w_0, with d_k the decay of step k,
//   ema_n = (prod_k d_k) w_0 + sum_k (1 - d_k) (prod_{j>k} d_j) w_k,
// summed here in float64 from the weights each step left. A fixed decay and
// Marian's step-dependent one (min(decay, (1 + k) / (10 + k)), which is the
// smaller for k <= 2 and then the fixed 0.3); float64 and float32 buffers,
// sizes off every vector width.
TEST(FlatAdam, MovingAverageIsItsClosedForm) {
  for (const auto dtype : {at::kDouble, at::kFloat})
    for (const bool step_dependent : {false, true}) {
      at::manual_seed(11);
      const double decay = step_dependent ? 0.3 : 0.7;
      std::vector<at::Tensor> params;
      for (const auto& s : std::vector<std::vector<int64_t>>{{7, 5}, {5}, {3, 67}, {1}})
        params.push_back(at::randn(s, at::TensorOptions(dtype)).requires_grad_(true));
      FlatAdam opt(params, AdamHyper{0.9, 0.98, 1e-9, 0.01});
      opt.enable_ema(decay, step_dependent);
      std::vector<at::Tensor> weights{opt.flat_param().to(at::kDouble, /*non_blocking=*/false, /*copy=*/true)};  // w_0
      std::vector<double> decays{0};
      for (int k = 1; k <= 8; ++k) {
        opt.flat_grad().copy_(at::randn(opt.flat_grad().sizes(), at::TensorOptions(dtype)));
        opt.step(5e-2, at::scalar_tensor(k % 2 ? 1.0 : 0.5, dtype));
        weights.push_back(opt.flat_param().to(at::kDouble, false, /*copy=*/true));
        decays.push_back(step_dependent ? std::min(decay, (1.0 + k) / (10.0 + k)) : decay);
      }
      const int n = 8;
      at::Tensor expected = at::zeros_like(weights[0]);
      for (int k = 0; k <= n; ++k) {
        double coef = k == 0 ? 1.0 : 1 - decays[k];
        for (int j = k + 1; j <= n; ++j) coef *= decays[j];
        expected += coef * weights[k];
      }
      const std::string what = std::string(dtype == at::kDouble ? "float64" : "float32") +
                               (step_dependent ? ", step-dependent" : ", fixed");
      EXPECT_LT(error(opt.flat_ema(), expected), dtype == at::kDouble ? 1e-14 : 2e-6) << what;
      EXPECT_GT(error(opt.flat_ema(), weights[n]), 1e-3) << what;  // an average, not the weights

      // Swapped in, the parameters hold the average; swapped back, the
      // weights again, bit for bit.
      const at::Tensor raw = opt.flat_param().clone(), ema = opt.flat_ema().clone();
      {
        const AveragedWeights averaged(opt);
        EXPECT_TRUE(params[2].equal(ema.narrow(0, 64 + 64, 3 * 67).view({3, 67}))) << what;
        EXPECT_TRUE(opt.flat_ema().equal(raw)) << what;
        // Saved while swapped, the state holds the raw weights.
        const std::string path = testing::temp_dir("flat_adam_ema") + "/state.pt";
        opt.save(path);
        FlatAdam again(std::vector<at::Tensor>{at::zeros({7, 5}, dtype), at::zeros({5}, dtype),
                                               at::zeros({3, 67}, dtype), at::zeros({1}, dtype)},
                       AdamHyper{});
        again.load(path);
        EXPECT_TRUE(again.flat_param().equal(raw)) << what;
        EXPECT_EQ(again.steps(), 8) << what;
      }
      EXPECT_TRUE(opt.flat_param().equal(raw)) << what;
      EXPECT_TRUE(opt.flat_ema().equal(ema)) << what;
    }
}

// ----------------------------------------------------------------- the same ops on a GPU

// The fused CUDA kernels against the composites: each case run fused on the
// GPU, as the composite on the GPU in the same dtypes, and as the composite
// in float64 on the CPU, with the bar of expect_close. Each checks that the
// fused path really ran (its autograd node), so a fallback cannot pass.
class FusedOpsCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "CUDA is not available here";
#ifndef NMT_WITH_CUDA
    GTEST_SKIP() << "this build has no CUDA kernels";
#endif
    glue::set_cuda_fused_ops(true);
  }
  void TearDown() override { glue::set_cuda_fused_ops(true); }
};

const SideCase kCudaSides[] = {{at::kFloat, at::kFloat}, {at::kFloat, at::kBFloat16}};

void expect_node(const at::Tensor& out, const std::string& function, const std::string& what) {
  ASSERT_TRUE(out.grad_fn() != nullptr) << what;
  EXPECT_NE(out.grad_fn()->name().find(function), std::string::npos)
      << what << ": ran " << out.grad_fn()->name() << ", not " << function;
}

TEST_F(FusedOpsCuda, AddLayerNormMatchesTheComposite) {
  at::manual_seed(21);
  struct Shape {
    int64_t b, t, c;
  };
  // 3 x 5 rows: fewer than the backward's warps have rows; 16 x 70 at
  // C = 512: several rows a warp, partial rows of every width.
  for (const SideCase& sc : kCudaSides)
    for (const Shape& sh : {Shape{3, 5, 1}, Shape{3, 5, 3}, Shape{3, 5, 64}, Shape{3, 5, 257}, Shape{16, 70, 512}})
      for (const bool with_y : {true, false})
        for (const double p : {0.0, 0.25}) {
          const Dropout d = dropout(p);
          const auto make = [&](std::vector<at::Tensor> in, at::ScalarType side, bool fused) {
            const auto f = fused ? add_layer_norm : add_layer_norm_reference;
            const auto o = f(in[0], with_y ? in[1] : at::Tensor(), in[2], in[3], 1e-5, d, side, at::Tensor());
            return Pass{in, {o.sum, o.norm}};
          };
          std::vector<at::Tensor> in{leaf({sh.b, sh.t, sh.c}, sc.stream), leaf({sh.b, sh.t, sh.c}, sc.side),
                                     leaf({sh.c}, sc.stream), leaf({sh.c}, sc.stream)};
          const std::vector<at::ScalarType> types{sc.stream, sc.side, sc.stream, sc.stream};
          const std::string what = name(sc) + " C=" + std::to_string(sh.c) + " rows=" +
                                   std::to_string(sh.b * sh.t) + (with_y ? " y" : "") + " p=" + std::to_string(p);
          Pass fused = make(recast(in, types, c10::kCUDA), sc.side, true);
          expect_node(fused.outputs[1], "AddLayerNormFunction", what);
          Pass same = make(recast(in, types, c10::kCUDA), sc.side, false);
          Pass ref64 = make(recast(in, {at::kDouble, at::kDouble, at::kDouble, at::kDouble}), at::kDouble, false);
          compare_runs(fused, same, ref64, sc.side, what);
        }
}

TEST_F(FusedOpsCuda, BiasReluDropoutMatchesTheComposite) {
  at::manual_seed(22);
  for (const SideCase& sc : kCudaSides)
    for (const int64_t F : {1, 3, 96, 257, 1024})
      for (const double p : {0.0, 0.3}) {
        const Dropout d = dropout(p, 9);
        const auto make = [&](std::vector<at::Tensor> in, bool fused) {
          return Pass{in, {(fused ? bias_relu_dropout : bias_relu_dropout_reference)(in[0], in[1], d)}};
        };
        const int64_t rows = F == 1024 ? 41 : 7;  // 2 x 41 rows: several row groups in the backward
        std::vector<at::Tensor> in{leaf({2, rows, F}, sc.side), leaf({F}, sc.stream)};
        const std::string what = name(sc) + " F=" + std::to_string(F) + " p=" + std::to_string(p);
        Pass fused = make(recast(in, {sc.side, sc.stream}, c10::kCUDA), true);
        expect_node(fused.outputs[0], "BiasReluDropoutFunction", what);
        EXPECT_EQ(fused.outputs[0].scalar_type(), sc.side);
        Pass same = make(recast(in, {sc.side, sc.stream}, c10::kCUDA), false);
        Pass ref64 = make(recast(in, {at::kDouble, at::kDouble}), false);
        compare_runs(fused, same, ref64, sc.side, what);
      }
}

TEST_F(FusedOpsCuda, EmbeddingMatchesTheComposite) {
  at::manual_seed(23);
  for (const int64_t C : {1, 3, 64, 257})
    for (const double p : {0.0, 0.2}) {
      const int64_t V = 11, B = 3, T = 6, offset = 2;
      at::Tensor ids = at::randint(0, V, {B, T}, at::kLong);
      ids[0][5] = 0;  // padding
      ids[2][1] = 0;
      ids[1][2] = 4, ids[1][3] = 4;  // a repeated token: two additions into one row
      const at::Tensor table = leaf({V, C}, at::kFloat);
      const at::Tensor pos = at::randn({T + offset, C}, at::kDouble).to(at::kFloat);
      const Dropout d = dropout(p, 1);
      at::Tensor fused_table = ref_leaf(table, at::kFloat, c10::kCUDA);
      at::Tensor ref_table = ref_leaf(table, at::kDouble);
      const at::Tensor out = embed_tokens(ids.cuda(), fused_table, pos.cuda(), offset, 1.7, 0, d);
      const std::string what = "C=" + std::to_string(C) + " p=" + std::to_string(p);
      expect_node(out, "EmbeddingFunction", what);
      const at::Tensor ref = embed_tokens_reference(ids, ref_table, pos.to(at::kDouble), offset, 1.7, 0, d);
      EXPECT_LT(error(out, ref), 1e-6) << what;  // no reductions: exact up to rounding
      const at::Tensor up = at::randn({B, T, C}, at::kDouble);
      (out.to(at::kCPU, at::kDouble) * up).sum().backward();
      (ref * up).sum().backward();
      EXPECT_LT(error(fused_table.grad(), ref_table.grad()), 1e-6) << what;
      EXPECT_EQ(fused_table.grad()[0].abs().max().item<double>(), 0.0) << what;  // the padding row
    }
}

TEST_F(FusedOpsCuda, LinearCrossEntropyMatchesTheComposite) {
  at::manual_seed(24);
  const int64_t V = 6000, C = 40, N = 150;
  at::Tensor labels = at::randint(0, V, {N}, at::kLong);
  labels[3] = 0, labels[17] = 0;  // ignored rows
  for (const SideCase& sc : kCudaSides)
    for (const bool with_bias : {false, true})
      for (const double smoothing : {0.0, 0.1}) {
        at::Tensor nll, raw;
        const auto make = [&](std::vector<at::Tensor> in, bool fused) {
          const at::Tensor b = with_bias ? in[2] : at::Tensor();
          const at::Tensor l = labels.to(in[0].device());
          raw = fused ? linear_cross_entropy(in[0], in[1], b, l, smoothing, 0, &nll)
                      : linear_cross_entropy_reference(in[0], in[1], b, l, smoothing, 0);
          return Pass{in, {raw * 0.37}};
        };
        std::vector<at::Tensor> in{leaf({N, C}, sc.side), leaf({V, C}, sc.stream, 0.5), leaf({V}, sc.stream)};
        const std::string what = name(sc) + (with_bias ? " bias" : "") + " e=" + std::to_string(smoothing);
        Pass fused = make(recast(in, {sc.side, sc.stream, sc.stream}, c10::kCUDA), true);
        expect_node(raw, "LinearCrossEntropyFunction", what);
        const at::Tensor nll_ref = linear_cross_entropy_reference(
            in[0].detach().to(at::kDouble), in[1].detach().to(at::kDouble),
            with_bias ? in[2].detach().to(at::kDouble) : at::Tensor(), labels, 0.0, 0);
        EXPECT_LT(std::abs(nll.item<double>() - nll_ref.item<double>()) / nll_ref.item<double>(),
                  sc.side == at::kBFloat16 ? 2e-2 : 1e-5)
            << what;
        Pass same = make(recast(in, {sc.side, sc.stream, sc.stream}, c10::kCUDA), false);
        Pass ref64 = make(recast(in, {at::kDouble, at::kDouble, at::kDouble}), false);
        compare_runs(fused, same, ref64, sc.side, what);
      }
}

// The dense layers' product: y = x w + b with w's gradient added into a
// flat buffer where the parameter has one (as FlatAdam gives it), returned
// otherwise; bf16 rows padded inside; on a GPU, bf16 through the cuBLAS
// product with float32 output.
void check_dense(c10::DeviceType device, const SideCase& sc) {
  at::manual_seed(25);
  const int64_t N = 37, in_dim = 48, out_dim = 80;  // nothing square: a transposed operand would show
  const auto on = at::TensorOptions(at::kFloat).device(device);
  for (const bool with_buffer : {false, true})
    for (const bool with_bias : {false, true}) {
      const std::string what = std::string(device == c10::kCUDA ? "cuda " : "cpu ") + name(sc) +
                               (with_buffer ? " buffer" : " returned") + (with_bias ? " bias" : "");
      std::vector<at::Tensor> in{leaf({N, in_dim}, sc.side), leaf({in_dim, out_dim}, at::kFloat, 0.2),
                                 leaf({out_dim}, at::kFloat)};
      std::vector<at::Tensor> g = recast(in, {sc.side, at::kFloat, at::kFloat}, device);
      at::Tensor buffer;
      if (with_buffer) {
        // Inside a larger buffer with something already in it, as gradients
        // accumulate; the bias's after the weight's.
        buffer = at::randn({in_dim * out_dim + 64 + out_dim}, on);
        g[1].mutable_grad() = buffer.narrow(0, 64, in_dim * out_dim).view({in_dim, out_dim});
        g[2].mutable_grad() = buffer.narrow(0, 64 + in_dim * out_dim, out_dim);
      }
      const at::Tensor before = with_buffer ? g[1].grad().clone() : at::Tensor();
      const at::Tensor before_b = with_buffer ? g[2].grad().clone() : at::Tensor();
      // A GPU, and a CPU with a gemm for the dtype in the process (oneDNN's
      // in Debian's LibTorch; MKL's or nmt's for float32 in PyPI's), take dense().
      const bool cpu_gemm = device == c10::kCPU && (sc.side == at::kBFloat16 ? cpu::bf16_gemm_available()
                                                                               : cpu::float_gemm_available());
      if (device == c10::kCUDA || cpu_gemm) {
        ASSERT_TRUE(dense_applies(g[0], g[1])) << what;
      } else {
        EXPECT_FALSE(dense_applies(g[0], g[1])) << what;
      }
      const auto side = [&](const at::Tensor& t) { return t.detach().to(sc.side); };
      const at::Tensor y = dense(g[0], g[1], sc.side == at::kFloat ? g[1] : side(g[1]),
                                 with_bias ? g[2] : at::Tensor(),
                                 with_bias ? (sc.side == at::kFloat ? g[2] : side(g[2])) : at::Tensor());
      expect_node(y, "DenseFunction", what);
      EXPECT_EQ(y.sizes(), (std::vector<int64_t>{N, out_dim})) << what;
      // The composites: in the same dtypes on the device, and in float64.
      std::vector<at::Tensor> s = recast(in, {sc.side, at::kFloat, at::kFloat}, device);
      const at::Tensor ys = with_bias ? at::addmm(s[2].to(sc.side), s[0], s[1].to(sc.side))
                                      : at::mm(s[0], s[1].to(sc.side));
      std::vector<at::Tensor> r = recast(in, {at::kDouble, at::kDouble, at::kDouble});
      const at::Tensor yr = with_bias ? at::addmm(r[2], r[0], r[1]) : at::mm(r[0], r[1]);
      expect_close(y, ys, yr, sc.side, what + " output");
      const at::Tensor up = at::randn({N, out_dim}, at::kDouble);
      (y.to(at::kCPU, at::kDouble) * up).sum().backward();
      (ys.to(at::kCPU, at::kDouble) * up).sum().backward();
      (yr * up).sum().backward();
      expect_close(g[0].grad(), s[0].grad(), r[0].grad(), sc.side, what + " dx");
      const at::Tensor dw = with_buffer ? g[1].grad() - before : g[1].grad();
      expect_close(dw, s[1].grad(), r[1].grad(), sc.side, what + " dw");
      if (with_buffer) {
        EXPECT_EQ(g[1].grad().data_ptr(), buffer.data_ptr<float>() + 64) << what << ": the buffer was replaced";
      }
      if (with_bias) {
        const at::Tensor db = with_buffer ? g[2].grad() - before_b : g[2].grad();
        expect_close(db, s[2].grad(), r[2].grad(), sc.side, what + " db");
      }
      if (with_buffer) {
        EXPECT_EQ(g[2].grad().data_ptr(), buffer.data_ptr<float>() + 64 + in_dim * out_dim) << what;
        if (!with_bias) {
          EXPECT_TRUE(torch::equal(g[2].grad(), before_b)) << what << ": no bias, yet its buffer changed";
        }
      }
    }
}

TEST(Dense, AddsItsWeightGradientIntoTheBuffer) {
  for (const SideCase& sc : {SideCase{at::kFloat, at::kFloat}, SideCase{at::kFloat, at::kBFloat16}})
    check_dense(c10::kCPU, sc);
}

// product_into and add_at_b read their operands as they lie (row-major,
// transposed views, rows with gaps, single rows and columns) and write or
// add into an output whose rows have gaps: oneDNN's gemm in float32 where it
// is loaded, against float64 products.
TEST(Dense, ProductsTakeEveryOperandLayout) {
  at::manual_seed(31);
  // t: [rows, cols] as asked: contiguous, a transposed view of [cols, rows],
  // or the first cols of rows that are 5 wider.
  const auto make = [](int64_t rows, int64_t cols, int layout) {
    if (layout == 1) return at::randn({cols, rows}).t();
    if (layout == 2) return at::randn({rows, cols + 5}).narrow(1, 0, cols);
    return at::randn({rows, cols});
  };
  for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{37, 19, 23}, {1, 19, 23}, {37, 19, 1}, {37, 1, 23}})
    for (int la = 0; la < 3; ++la)
      for (int lb = 0; lb < 3; ++lb) {
        const std::string what = "m " + std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n) +
                                 ", layouts " + std::to_string(la) + " " + std::to_string(lb);
        const at::Tensor a = make(m, k, la), b = make(k, n, lb), bias = at::randn({n});
        const at::Tensor ref = at::mm(a.to(at::kDouble), b.to(at::kDouble));
        // Into every other row of a wider buffer, with and without the bias.
        at::Tensor room = at::full({2 * m, n + 3}, 7.0f);
        at::Tensor out = room.slice(0, 0, 2 * m, 2).narrow(1, 0, n);
        product_into(out, a, b, at::Tensor());
        EXPECT_LT((out.to(at::kDouble) - ref).abs().max().item<double>(), 1e-4) << what;
        EXPECT_EQ(room.slice(0, 1, 2 * m, 2).ne(7.0f).sum().item<int64_t>(), 0) << what << ": rows between written";
        at::Tensor out_b = at::empty({m, 2 * n}).narrow(1, 0, n);  // rows apart
        product_into(out_b, a, b, bias);
        EXPECT_LT((out_b.to(at::kDouble) - ref - bias.to(at::kDouble)).abs().max().item<double>(), 1e-4) << what;
        // g += aᵀ c with a = op(a)ᵀ: the same product, added to what g held.
        at::Tensor g = at::randn({m, n});
        const at::Tensor before = g.to(at::kDouble);
        add_at_b(g, a.t(), b);
        EXPECT_LT((g.to(at::kDouble) - before - ref).abs().max().item<double>(), 1e-4) << what << " add_at_b";
        add_at_b(g, a.t(), b, 0.0f);
        EXPECT_LT((g.to(at::kDouble) - ref).abs().max().item<double>(), 1e-4) << what << " add_at_b, beta 0";
      }
}

// Why the bf16 product tests skip (oneDNN's bf16 gemm needs AVX-512).
constexpr const char* kNoBf16Gemm = "no bf16 gemm with float32 output in this process that runs on this CPU";

// One gemm case against float64: A and B stored [m, k] or [k, m], [k, n] or
// [n, k] in T, rows 3 wider than used; alpha 1.5, beta 0 over NaN (never
// read) or added; the columns of C past n must stay as they were.
template <typename T>
void check_gemm_case(const std::function<void(const cpu::GemmParams<T>&)>& gemm, const std::string& what, int64_t m,
                     int64_t k, int64_t n, bool ta, bool tb, float beta) {
  const auto dtype = std::is_same_v<T, float> ? at::kFloat : at::kBFloat16;
  const at::Tensor a_store = at::randn({ta ? k : m, (ta ? m : k) + 3}).to(dtype);
  const at::Tensor b_store = at::randn({tb ? n : k, (tb ? k : n) + 3}).to(dtype);
  const at::Tensor a = a_store.narrow(1, 0, ta ? m : k), b = b_store.narrow(1, 0, tb ? k : n);
  at::Tensor c_store = at::randn({m, n + 3});
  if (beta == 0) c_store.narrow(1, 0, n).fill_(NAN);
  const at::Tensor c_before = c_store.clone();
  cpu::GemmParams<T> p;
  p.trans_a = ta, p.trans_b = tb, p.m = m, p.n = n, p.k = k, p.alpha = 1.5f, p.beta = beta;
  p.a = static_cast<const T*>(a_store.data_ptr()), p.lda = a_store.size(1);
  p.b = static_cast<const T*>(b_store.data_ptr()), p.ldb = b_store.size(1);
  p.c = c_store.data_ptr<float>(), p.ldc = c_store.size(1);
  gemm(p);
  const at::Tensor opa = (ta ? a.t() : a).to(at::kDouble), opb = (tb ? b.t() : b).to(at::kDouble);
  at::Tensor ref = 1.5 * at::mm(opa, opb);
  if (beta != 0) ref += beta * c_before.narrow(1, 0, n).to(at::kDouble);
  EXPECT_LT((c_store.narrow(1, 0, n).to(at::kDouble) - ref).abs().max().item<double>(), 2e-4 * std::sqrt(k)) << what;
  EXPECT_TRUE(c_store.narrow(1, n, 3).equal(c_before.narrow(1, n, 3))) << what << ": columns past n written";
}

// Each float32 gemm in the process (oneDNN's, MKL's where libmkl_rt is
// installed, nmt's own) against float64 products: every transpose, rows
// with gaps in A, B and C, alpha and beta (0: C holds NaN, never read), and
// shapes with a single row, column or depth. nmt's also takes shapes over
// its blocks: several passes of k, blocks of rows and passes of columns
// (sgemm_cpu.cpp), each with a partial last one. The columns of C past n
// must stay as they were.
TEST(FloatGemm, EachLibraryMatchesTheFloat64Reference) {
  std::vector<cpu::FloatGemm> libraries{cpu::FloatGemm::kNmt};
  if (cpu::onednn_gemm_available<float>()) libraries.push_back(cpu::FloatGemm::kOnednn);
  if (cpu::mkl_sgemm_available()) libraries.push_back(cpu::FloatGemm::kMkl);
  const char* names[] = {"oneDNN", "MKL", "nmt"};
  at::manual_seed(33);
  using Shape = std::tuple<int64_t, int64_t, int64_t>;
  const std::vector<Shape> shapes{{37, 19, 23}, {1, 64, 300}, {130, 1, 7}, {65, 129, 1}};
  const std::vector<Shape> nmt_shapes{{203, 1100, 45}, {5, 3, 4133}, {97, 513, 33}};
  for (const cpu::FloatGemm library : libraries) {
    std::vector<Shape> all = shapes;
    if (library == cpu::FloatGemm::kNmt) all.insert(all.end(), nmt_shapes.begin(), nmt_shapes.end());
    for (const auto& [m, k, n] : all)
      for (const bool ta : {false, true})
        for (const bool tb : {false, true})
          for (const float beta : {0.0f, 1.0f, 0.5f}) {
            const std::string what = std::string(names[static_cast<int>(library)]) + " m " + std::to_string(m) +
                                     " k " + std::to_string(k) + " n " + std::to_string(n) + (ta ? " Aᵀ" : "") +
                                     (tb ? " Bᵀ" : "") + " beta " + std::to_string(beta);
            const auto gemm = [&](const cpu::GemmParams<float>& q) { cpu::float_gemm_on(library, q); };
            check_gemm_case<float>(gemm, what, m, k, n, ta, tb, beta);
          }
  }
}

// The choice of library: a name wins (and must be present); auto takes MKL
// where it is present on an Intel CPU, oneDNN where present otherwise, nmt's
// where MKL is alone on another vendor's CPU, and sends
// the long weight gradients to nmt's sgemm where oneDNN runs AVX2 kernels;
// a bad name is an InputError naming the variable.
TEST(FloatGemm, ChoiceRule) {
  using cpu::choose_float_gemm;
  using cpu::FloatGemm;
  EXPECT_EQ(choose_float_gemm("onednn", true, true, true, false).library, FloatGemm::kOnednn);
  EXPECT_TRUE(choose_float_gemm("onednn", true, true, true, false).by_hand);
  EXPECT_EQ(choose_float_gemm("mkl", true, true, false, false).library, FloatGemm::kMkl);
  EXPECT_EQ(choose_float_gemm("nmt", false, false, false, false).library, FloatGemm::kNmt);
  EXPECT_EQ(choose_float_gemm("", true, true, true, false).library, FloatGemm::kMkl);
  EXPECT_FALSE(choose_float_gemm("", true, true, true, false).by_hand);
  EXPECT_EQ(choose_float_gemm("auto", true, true, false, false).library, FloatGemm::kOnednn) << "not an Intel CPU";
  EXPECT_EQ(choose_float_gemm("auto", true, false, true, false).library, FloatGemm::kOnednn) << "no MKL";
  EXPECT_EQ(choose_float_gemm("", false, true, true, false).library, FloatGemm::kMkl) << "no oneDNN, Intel";
  EXPECT_EQ(choose_float_gemm("", false, true, false, false).library, FloatGemm::kNmt) << "MKL alone, not Intel";
  EXPECT_FALSE(choose_float_gemm("", false, true, false, false).by_hand);
  EXPECT_EQ(choose_float_gemm("mkl", false, true, false, false).library, FloatGemm::kMkl) << "named";
  // The weight gradients: on nmt's only under oneDNN chosen by auto, with AVX2 kernels.
  EXPECT_TRUE(choose_float_gemm("", true, false, false, true).weight_gradients_on_nmt);
  EXPECT_FALSE(choose_float_gemm("", true, false, false, false).weight_gradients_on_nmt) << "AVX-512 kernels";
  EXPECT_FALSE(choose_float_gemm("onednn", true, false, false, true).weight_gradients_on_nmt) << "named";
  EXPECT_FALSE(choose_float_gemm("", true, true, true, true).weight_gradients_on_nmt) << "MKL";
  cpu::GemmParams<float> p;
  p.trans_a = true, p.m = 256, p.k = 2100, p.n = 1024;
  EXPECT_TRUE(cpu::is_long_weight_gradient(p)) << "Xᵀ · dY over a batch's rows";
  p.k = 128;
  EXPECT_FALSE(cpu::is_long_weight_gradient(p)) << "an output projection chunk's";
  p.k = 2100, p.m = 1;
  EXPECT_FALSE(cpu::is_long_weight_gradient(p)) << "a matrix-vector product";
  p.m = 256, p.n = 1;
  EXPECT_FALSE(cpu::is_long_weight_gradient(p)) << "a matrix-vector product";
  p.m = 512, p.n = 2048;
  EXPECT_FALSE(cpu::is_long_weight_gradient(p)) << "Transformer-base's feed-forward: larger than L2";
  p.n = 512;
  EXPECT_TRUE(cpu::is_long_weight_gradient(p)) << "Transformer-base's attention output";
  p.m = 256, p.n = 1024;
  p.k = 2100, p.trans_b = true;
  EXPECT_FALSE(cpu::is_long_weight_gradient(p));
  p.trans_a = false, p.trans_b = false;
  EXPECT_FALSE(cpu::is_long_weight_gradient(p)) << "a forward product";
  const auto error_of = [&](const std::string& want, bool onednn, bool mkl) -> std::string {
    try {
      choose_float_gemm(want, onednn, mkl, true, false);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of("blas", true, true), "NMT_CPU_GEMM: 'blas' is not one of: auto | onednn | mkl | nmt");
  EXPECT_NE(error_of("mkl", true, false).find("NMT_CPU_GEMM: mkl is not in this process"), std::string::npos)
      << error_of("mkl", true, false);
  EXPECT_NE(error_of("onednn", false, true).find("NMT_CPU_GEMM: onednn is not in this process"), std::string::npos);
}

// Each bf16 gemm in the process (oneDNN's where LibTorch exports it, MKL's
// where LibTorch carries it or libmkl_rt is installed) against float64
// products of the same bf16 values, summed in float32: every transpose, rows
// with gaps, alpha and beta (0: C holds NaN, never read). Columns of C past
// n must stay as they were. A process with neither runs no case.
TEST(Bf16Gemm, EachLibraryMatchesTheFloat64Reference) {
  std::vector<std::pair<std::string, void (*)(const cpu::GemmParams<bf16>&)>> libraries;
  if (cpu::onednn_gemm_available<bf16>())
    libraries.emplace_back("oneDNN", [](const cpu::GemmParams<bf16>& p) { cpu::onednn_gemm(p); });
  if (cpu::mkl_bf16_gemm_available()) libraries.emplace_back("MKL", &cpu::mkl_bf16_gemm);
  if (libraries.empty()) GTEST_SKIP() << kNoBf16Gemm;
  at::manual_seed(35);
  using Shape = std::tuple<int64_t, int64_t, int64_t>;
  for (const auto& [name, gemm] : libraries)
    for (const auto& [m, k, n] : std::vector<Shape>{{37, 19, 23}, {1, 64, 300}, {130, 1, 7}, {70, 300, 45}})
      for (const bool ta : {false, true})
        for (const bool tb : {false, true})
          for (const float beta : {0.0f, 1.0f}) {
            const std::string what = name + " m " + std::to_string(m) + " k " + std::to_string(k) + " n " +
                                     std::to_string(n) + (ta ? " Aᵀ" : "") + (tb ? " Bᵀ" : "") + " beta " +
                                     std::to_string(beta);
            check_gemm_case<bf16>(gemm, what, m, k, n, ta, tb, beta);
          }
}

// bf16 products: oneDNN's where present, MKL's only when named (it ran at
// its float32 speed on an AMD EPYC), else none (LibTorch's mm).
TEST(Bf16Gemm, ChoiceRule) {
  using cpu::Bf16Gemm;
  using cpu::choose_bf16_gemm;
  EXPECT_EQ(choose_bf16_gemm("", true, true), Bf16Gemm::kOnednn);
  EXPECT_EQ(choose_bf16_gemm("auto", true, false), Bf16Gemm::kOnednn);
  EXPECT_EQ(choose_bf16_gemm("", false, true), Bf16Gemm::kNone) << "MKL's only by hand";
  EXPECT_EQ(choose_bf16_gemm("nmt", false, true), Bf16Gemm::kNone) << "nmt has no bf16 gemm";
  EXPECT_EQ(choose_bf16_gemm("mkl", true, true), Bf16Gemm::kMkl);
  EXPECT_EQ(choose_bf16_gemm("mkl", false, true), Bf16Gemm::kMkl);
  EXPECT_EQ(choose_bf16_gemm("mkl", true, false), Bf16Gemm::kOnednn) << "an MKL without a bf16 gemm";
  EXPECT_EQ(choose_bf16_gemm("", false, false), Bf16Gemm::kNone);
}

// nmt's sgemm sums every element in one order whatever the team: bit for
// bit the same C on one thread and on three, for each transpose.
TEST(FloatGemm, NmtSgemmDoesNotDependOnTheThreadCount) {
  at::manual_seed(34);
  const int threads = at::get_num_threads();
  const int64_t m = 250, k = 700, n = 300;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      const at::Tensor a = at::randn({ta ? k : m, ta ? m : k}), b = at::randn({tb ? n : k, tb ? k : n});
      const auto run = [&](int team) {
        at::set_num_threads(team);
        at::Tensor c = at::zeros({m, n});
        cpu::GemmParams<float> p;
        p.trans_a = ta, p.trans_b = tb, p.m = m, p.n = n, p.k = k, p.beta = 0;
        p.a = a.data_ptr<float>(), p.lda = a.size(1), p.b = b.data_ptr<float>(), p.ldb = b.size(1);
        p.c = c.data_ptr<float>(), p.ldc = n;
        cpu::sgemm(p);
        return c;
      };
      const at::Tensor alone = run(1), team = run(3);
      at::set_num_threads(threads);
      EXPECT_TRUE(alone.equal(team)) << (ta ? "Aᵀ" : "A") << (tb ? " Bᵀ" : " B");
    }
}

// The arithmetic peak's loops do the work they count: after R rounds every
// lane of every chain holds its own start plus R increments of 2^-20 (exact
// in float32 here), so no chain was merged with another, skipped or cut
// short, and the flops returned are R · chains · lanes · 2 (4 for the bf16
// dot products, which run where AVX512-BF16 and the AVX-512 kernels are, and
// elsewhere leave the accumulators as they were). Per instruction set
// (kernels.ops_*); the rate itself is a benchmark figure, only checked > 0.
TEST(ArithmeticPeak, EveryChainRunsEveryRound) {
  const int64_t lanes = cpu::peak_lanes(), rounds = 100003, n = cpu::kPeakChains * lanes;
  EXPECT_EQ(lanes * 4, kernel_isa() >= CpuIsa::kAvx512 ? 64 : kernel_isa() == CpuIsa::kAvx2 ? 32 : 16);
  std::vector<float> start(n);
  for (int64_t i = 0; i < n; ++i) start[i] = 1.0f + static_cast<float>(i) * 0x1p-10f;
  const auto check = [&](const std::vector<float>& acc, const char* what) {
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(static_cast<double>(acc[i]), static_cast<double>(start[i]) + rounds * 0x1p-20)
          << what << ": chain " << i / lanes << ", lane " << i % lanes;
  };
  std::vector<float> acc = start;
  EXPECT_EQ(cpu::fma_chains(rounds, 1.0f, 0x1p-20f, acc.data()), 2.0 * rounds * n);
  check(acc, "multiply-adds");
  EXPECT_EQ(cpu::has_bf16_dot(), kernel_isa() >= CpuIsa::kAvx512 && cpu_features().avx512_bf16);
  acc = start;
  const double dot_flops = cpu::bf16_dot_chains(rounds, 0x1p-20f, acc.data());
  if (cpu::has_bf16_dot()) {
    EXPECT_EQ(dot_flops, 4.0 * rounds * n);
    check(acc, "bf16 dot products");
  } else {
    EXPECT_EQ(dot_flops, 0.0);
    EXPECT_EQ(acc, start) << "no dot products here";
  }
  EXPECT_GT(cpu::arithmetic_peak_gflops(false, 1), 0.0);
  EXPECT_EQ(cpu::arithmetic_peak_gflops(true, 1) > 0, cpu::has_bf16_dot());
}

// An input with row room (empty_with_row_room) takes one product over all
// its rows: the same output and gradients as the block-and-padded-rows path
// of an input without, and an output that has the room too.
TEST(Dense, OneProductOverRowRoomGivesTheSameResults) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << kNoBf16Gemm;
  at::manual_seed(28);
  const int64_t N = 100, in_dim = 48, out_dim = 80;  // 100 rows: one block of 64 and 36 more
  const at::Tensor x0 = at::randn({N, in_dim}).to(at::kBFloat16);
  const at::Tensor room = empty_with_row_room({N, in_dim}, x0.options());
  ASSERT_EQ(room.sizes(), x0.sizes());
  ASSERT_GE(room.storage().nbytes(), static_cast<size_t>(128 * in_dim * 2));
  EXPECT_EQ(at::from_blob(room.data_ptr(), {128, in_dim}, x0.options()).narrow(0, N, 28).abs().max().item<float>(),
            0.0f)
      << "the extra rows are zeros";
  const at::Tensor w0 = at::randn({in_dim, out_dim}) * 0.2, b0 = at::randn({out_dim});
  const at::Tensor up = at::randn({N, out_dim});
  const auto run = [&](const at::Tensor& x_values, bool with_room) {
    at::Tensor x = with_room ? empty_with_row_room(x_values.sizes(), x_values.options()) : at::empty_like(x_values);
    x.copy_(x_values);
    x.requires_grad_(true);
    at::Tensor w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    const at::Tensor y = dense(x, w, w.detach().to(at::kBFloat16), b, b.detach().to(at::kBFloat16));
    (y.to(at::kFloat) * up).sum().backward();
    return std::vector<at::Tensor>{y, x.grad(), w.grad(), b.grad()};
  };
  const auto with = run(x0, true), without = run(x0, false);
  EXPECT_GE(with[0].storage().nbytes(), static_cast<size_t>(128 * out_dim * 2)) << "the output has room too";
  for (size_t i = 0; i < with.size(); ++i) EXPECT_TRUE(with[i].equal(without[i])) << "result " << i;
}

TEST_F(FusedOpsCuda, DenseAddsItsWeightGradientIntoTheBuffer) {
  for (const SideCase& sc : kCudaSides) check_dense(c10::kCUDA, sc);
}

// Adam's CUDA kernel against the CPU kernel, the clipping factor on the GPU.
TEST_F(FusedOpsCuda, FlatAdamMatchesTheCpuKernel) {
  at::manual_seed(26);
  for (const double wd : {0.0, 0.01}) {
    // Parameter sizes off every vector width (the kernel's tail).
    const std::vector<std::vector<int64_t>> shapes{{7, 5}, {5}, {3, 67}, {1}};
    std::vector<at::Tensor> cpu_params, gpu_params;
    for (const auto& s : shapes) {
      const at::Tensor p = at::randn(s, at::kFloat);
      cpu_params.push_back(p.clone().requires_grad_(true));
      gpu_params.push_back(p.cuda().requires_grad_(true));
    }
    const AdamHyper hyper{0.9, 0.98, 1e-9, wd};
    FlatAdam cpu(cpu_params, hyper), gpu(gpu_params, hyper);
    cpu.enable_ema(0.8, /*step_dependent=*/wd > 0);  // the average: fused on the CPU, lerp_ on the GPU
    gpu.enable_ema(0.8, wd > 0);
    for (int step = 1; step <= 5; ++step) {
      const at::Tensor grad = at::randn(cpu.flat_grad().sizes(), at::kFloat);
      cpu.flat_grad().copy_(grad);
      gpu.flat_grad().copy_(grad);
      EXPECT_NEAR(gpu.grad_norm().item<double>(), cpu.grad_norm().item<double>(),
                  1e-5 * cpu.grad_norm().item<double>());
      const double scale = step % 2 ? 1.0 : 0.5;
      cpu.step(1e-2, at::scalar_tensor(scale, at::kFloat));
      gpu.step(1e-2, at::scalar_tensor(scale, at::kFloat).cuda());
      EXPECT_LT(error(gpu.flat_param(), cpu.flat_param()), 1e-6) << "step " << step << " wd " << wd;
      EXPECT_LT(error(gpu.exp_avg_sq(), cpu.exp_avg_sq()), 1e-6) << "step " << step << " wd " << wd;
      EXPECT_LT(error(gpu.flat_ema(), cpu.flat_ema()), 1e-6) << "step " << step << " wd " << wd;
    }
  }
}

// Switched off (NMT_CUDA_FUSED_OPS=0), a GPU runs the composites.
TEST_F(FusedOpsCuda, SwitchedOffRunsTheComposites) {
  glue::set_cuda_fused_ops(false);
  const auto opts = at::TensorOptions(at::kFloat).device(at::kCUDA);
  const at::Tensor x = at::randn({2, 3, 8}, opts).requires_grad_(true);
  const auto o = add_layer_norm(x, at::randn({2, 3, 8}, opts), at::ones({8}, opts), at::zeros({8}, opts), 1e-5,
                                dropout(0.1), at::kFloat);
  EXPECT_EQ(o.norm.grad_fn()->name().find("AddLayerNormFunction"), std::string::npos) << o.norm.grad_fn()->name();
  EXPECT_FALSE(dense_applies(x.view({6, 8}), at::randn({8, 4}, opts)));
}

}  // namespace
}  // namespace nmt::ops
