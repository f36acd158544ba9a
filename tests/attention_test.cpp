// The attention operator (src/ops/attention) in every backend, device and
// dtype, in the style of CTranslate2's ops_test.cc: one parameterized suite,
// Attention/AttentionOp.<Check>/<backend>_<device>_<dtype>.
//
// The reference everywhere is the `torch` backend computed in float64 on the
// CPU (LibTorch's own scaled-dot-product attention plus autograd). Inputs are
// generated in float64 and rounded once to the case's dtype; the reference
// is computed from those rounded values, so a float32 error measures only the
// arithmetic of the backend, not the rounding of its inputs (which would be
// the same for every backend and hide kernel errors below it).
//
// Tolerances (errors are max |x - ref| / max(1, max |ref|), i.e. absolute for
// values of magnitude ~1 and relative for larger gradients):
//   float64: 1e-10;
//   float32: 2 * (error of the torch backend run in float32 on the same
//            device, against the same reference) + 1e-6 (4e-6 under attention
//            dropout, see check_against_reference): a backend may be
//            at most twice as inaccurate as LibTorch itself. The CPU kernels'
//            generic copy (NMT_CPU_ISA=generic: plain x86-64, no FMA, so
//            every product is rounded before it is added) gets 4x.
//
// CUDA cases skip (with a message) where no GPU is visible or the build has no
// CUDA kernels; the CUDA kernels are float32 only, so their float64 cases
// skip as well.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/attention/attention.h"
#include "ops/attention/cpu/attention_cpu.h"
#include "ops/attention/cuda/attention_cuda.h"
#include "ops/op_glue.h"
#include "util/cpu_features.h"

namespace nmt::ops {
namespace {

// ---------------------------------------------------------------------------
// Parameters: backend x device x dtype
// ---------------------------------------------------------------------------

struct Param {
  AttentionBackend backend;
  c10::DeviceType device;
  at::ScalarType dtype;
};

std::string device_name(c10::DeviceType device) { return device == c10::kCUDA ? "cuda" : "cpu"; }
std::string dtype_name(at::ScalarType dtype) { return dtype == at::kFloat ? "float32" : "float64"; }

std::string param_name(const Param& p) {
  return backend_name(p.backend) + "_" + device_name(p.device) + "_" + dtype_name(p.dtype);
}

// gtest prints parameters of failing tests with this (found by ADL).
void PrintTo(const Param& p, std::ostream* os) { *os << param_name(p); }

std::vector<Param> all_params() {
  std::vector<Param> params;
  for (AttentionBackend backend :
       {AttentionBackend::kTorch, AttentionBackend::kNaive, AttentionBackend::kFlash}) {
    for (c10::DeviceType device : {c10::kCPU, c10::kCUDA}) {
      for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
        // Our CUDA kernels are float32 (and bf16, tested below): no float64.
        if (device == c10::kCUDA && backend != AttentionBackend::kTorch && dtype == at::kDouble)
          continue;
        params.push_back({backend, device, dtype});
      }
    }
  }
  return params;
}

// float64 tolerance against the float64 reference (see the file comment).
constexpr double kFloat64Tolerance = 1e-10;
// The torch backend in float32 against the float64 reference (relative to
// the largest reference value, at least 1).
constexpr double kTorchFloat32Tolerance = 2e-5;  // measured up to 5.4e-6

// ---------------------------------------------------------------------------
// Shapes and inputs
// ---------------------------------------------------------------------------

struct Shape {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  bool lengths = true;          // pass key_lengths (pattern in make_inputs)
  std::optional<double> scale;  // default 1/sqrt(D)
};

std::string describe(const Shape& s) {
  std::ostringstream os;
  os << "B=" << s.B << " H=" << s.H << " Tq=" << s.Tq << " Tk=" << s.Tk << " D=" << s.D
     << (s.causal ? " causal" : " non-causal") << (s.lengths ? " key_lengths" : " no key_lengths");
  if (s.scale) os << " scale=" << *s.scale;
  return os.str();
}

// The reference cases. The full cross product of Tq, Tk in {1, 3, 17, 64, 65,
// 127, 200, 257}, D in {8, 32, 64, 80} and causal would take minutes, so this
// list is a hand-picked subset that still covers every Tq, every Tk (each one
// both as Tq == Tk and in cross-attention), every D, both causal settings with
// Tq < Tk and Tq > Tk, sizes at and just past the flash kernels' 64-row/key
// blocks, and odd B*H (the flash backward splits one head's key blocks across
// threads when B*H is odd and small). Key lengths follow b % 4 -> {0, full,
// random in [1, Tk], 1}, so every B >= 2 case has a fully masked row and a
// full one, B >= 3 a random length and B >= 4 a length of 1.
const std::vector<Shape>& reference_shapes() {
  // clang-format off
  static const std::vector<Shape> shapes = {
   // {B, H,  Tq,  Tk,  D, causal, lengths, scale}
      {2, 2,   1,   1,  8, false},
      {4, 1,   1,  65, 32, true},               // one query row sees key 0 only
      {3, 1,   1, 257, 80, false},
      {2, 2,   3,   3, 64, true},
      {4, 2,   3, 200,  8, false},
      {3, 1,   3,  17, 80, true},
      {2, 3,  17,  17, 32, false},
      {4, 1,  17,   1, 64, true},               // Tq > Tk: later rows see every key
      {2, 2,  17, 127, 80, false},
      {4, 2,  64,  64,  8, true},               // exactly one block
      {3, 1,  64,  65, 32, false},
      {2, 2,  64, 257, 64, true},
      {4, 2,  65,  65, 80, false},              // one row/key past a block
      {3, 1,  65,  64,  8, true},
      {2, 1,  65,   3, 64, false},
      {2, 2, 127, 127, 32, true},
      {4, 1, 127,  17, 64, false},
      {2, 1, 127, 200,  8, true},
      {3, 1, 200, 200, 80, true},
      {2, 2, 200,  64, 32, false},
      {4, 1, 200,   1,  8, false},
      {2, 1, 257, 257, 64, false},
      {2, 2, 257, 127, 80, true},
      {5, 1, 257,   3, 32, true},
      {3, 1,  17,  65,  8, true},
      // no key_lengths at all (B = 1 gives B*H odd for the flash backward)
      {1, 3,  65, 200, 64, false, false},
      {1, 1, 257,  65,  8, true, false},
      {2, 2,   3,  64, 32, true, false},
      {2, 2, 200, 257, 80, true, false},
      // causal alone on a square problem: the torch backend hands it to
      // SDPA as is_causal (LibTorch 2.x) instead of a mask
      {2, 2,  70,  70, 32, true, false},
      // an explicit scale
      {3, 2,  17,  65, 32, false, true, 0.3},
      {2, 1,  64, 127, 80, true, true, 1.7},
  };
  // clang-format on
  return shapes;
}

struct Inputs {
  at::Tensor q;    // q: [B, H, Tq, D] float64 CPU
  at::Tensor k;    // k: [B, H, Tk, D]
  at::Tensor v;    // v: [B, H, Tk, D]
  at::Tensor d_o;  // d_o: [B, H, Tq, D], the upstream gradient
  AttentionOptions options;  // key_lengths on the CPU
};

std::vector<int64_t> pattern_lengths(int64_t batch, int64_t k_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> random_len(1, k_len);
  std::vector<int64_t> lengths(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t kind = b % 4;
    lengths[static_cast<size_t>(b)] =
        kind == 0 ? 0 : kind == 1 ? k_len : kind == 2 ? random_len(rng) : 1;
  }
  return lengths;
}

// Inputs in float64, rounded to `dtype` (see the file comment). `lengths`
// overrides the b % 4 pattern.
Inputs make_inputs(const Shape& s, uint64_t seed, at::ScalarType dtype,
                   std::optional<std::vector<int64_t>> lengths = std::nullopt) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const auto round = [&](const at::Tensor& x) { return x.to(dtype).to(at::kDouble); };
  Inputs in;
  in.q = round(at::randn({s.B, s.H, s.Tq, s.D}, gen, f64));
  in.k = round(at::randn({s.B, s.H, s.Tk, s.D}, gen, f64));
  in.v = round(at::randn({s.B, s.H, s.Tk, s.D}, gen, f64));
  in.d_o = round(at::randn({s.B, s.H, s.Tq, s.D}, gen, f64));
  in.options.causal = s.causal;
  in.options.scale = s.scale;
  if (lengths) {
    in.options.key_lengths = at::tensor(*lengths, at::kLong);
  } else if (s.lengths) {
    in.options.key_lengths = at::tensor(pattern_lengths(s.B, s.Tk, seed), at::kLong);
  }
  return in;
}

// ---------------------------------------------------------------------------
// Running one backend with autograd
// ---------------------------------------------------------------------------

// How q, k and v are laid out in memory (values are the same in all three).
enum class Layout {
  kContiguous,  // [B, H, T, D]
  kTimeMajor,   // memory [B, T, H, D] viewed .transpose(1, 2), as the model's heads are
  kDimStrided,  // memory [B, H, D, T] viewed .transpose(2, 3): stride(-1) != 1
};

at::Tensor laid_out(const at::Tensor& x, Layout layout) {
  switch (layout) {
    case Layout::kContiguous: return x.contiguous();
    case Layout::kTimeMajor: return x.transpose(1, 2).contiguous().transpose(1, 2);
    case Layout::kDimStrided: return x.transpose(2, 3).contiguous().transpose(2, 3);
  }
  return x;
}

struct Outputs {
  at::Tensor o, dq, dk, dv;  // float64 on the CPU
};

const char* const kOutputNames[] = {"o", "dq", "dk", "dv"};
at::Tensor output_at(const Outputs& out, int i) {
  return i == 0 ? out.o : i == 1 ? out.dq : i == 2 ? out.dk : out.dv;
}

AttentionOptions options_on(const AttentionOptions& options, c10::Device device) {
  AttentionOptions moved = options;
  if (moved.key_lengths.defined()) moved.key_lengths = moved.key_lengths.to(device);
  return moved;
}

// o = attention(q, k, v) and dq, dk, dv for the upstream gradient in.d_o.
Outputs run(const Inputs& in, AttentionBackend backend, c10::DeviceType device_type,
            at::ScalarType dtype, Layout layout = Layout::kContiguous) {
  const c10::Device device(device_type);
  // detach() keeps the strides of the layout, so the leaf is the strided view.
  const auto leaf = [&](const at::Tensor& x) {
    return laid_out(x.to(device, dtype), layout).detach().requires_grad_();
  };
  const at::Tensor q = leaf(in.q), k = leaf(in.k), v = leaf(in.v);
  const at::Tensor o = attention(q, k, v, options_on(in.options, device), backend);
  const auto grads = torch::autograd::grad({o}, {q, k, v}, {in.d_o.to(device, dtype)});
  const auto f64 = [](const at::Tensor& x) { return x.detach().to(at::kCPU, at::kDouble); };
  return {f64(o), f64(grads[0]), f64(grads[1]), f64(grads[2])};
}

// max |x|, 0 for an empty tensor (max() of none throws).
double max_abs(const at::Tensor& x) {
  return x.numel() == 0 ? 0.0 : x.abs().max().item<double>();
}

// max |x - ref| / max(1, max |ref|); NaN anywhere gives NaN, which fails
// every EXPECT_LE.
double error(const at::Tensor& x, const at::Tensor& ref) {
  return max_abs(x - ref) / std::max(1.0, max_abs(ref));
}

// Runs one case's checks; an exception (a backend rejecting the case) fails
// that case only, with its first line, and the loop goes on to the next.
template <typename Fn>
void checked(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    ADD_FAILURE() << "threw: " << what.substr(0, what.find('\n'));
  }
}

bool all_finite(const Outputs& out) {
  for (int i = 0; i < 4; ++i) {
    if (!at::isfinite(output_at(out, i)).all().item<bool>()) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The suite
// ---------------------------------------------------------------------------

class AttentionOp : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const Param& p = GetParam();
    if (p.device != c10::kCUDA) return;
    if (!torch::cuda::is_available()) {
      GTEST_SKIP() << "CUDA is not available here; " << param_name(p) << " not run";
    }
#ifndef NMT_WITH_CUDA
    if (p.backend != AttentionBackend::kTorch) {
      GTEST_SKIP() << "this build has no CUDA attention kernels; " << param_name(p) << " not run";
    }
#endif
  }
};

// 1. Outputs and gradients against the float64 CPU torch reference.
// See the tolerances at the top.
double float32_factor(const Param& p) {
  return p.device == c10::kCPU && p.backend != AttentionBackend::kTorch &&
                 kernel_isa() == CpuIsa::kGeneric
             ? 4.0
             : 2.0;
}

void check_against_reference(const Param& p, const Shape& s, uint64_t seed, const Dropout& dropout = {}) {
  Inputs in = make_inputs(s, seed, p.dtype);
  in.options.dropout = dropout;
  // The reference: LibTorch's composition in float64; for the torch backend
  // itself, our naive kernel's float64 loops (an implementation of its own,
  // so that the torch backend is not held against itself).
  const bool torch_backend = p.backend == AttentionBackend::kTorch;
  const Outputs ref = run(in, torch_backend ? AttentionBackend::kNaive : AttentionBackend::kTorch, c10::kCPU, at::kDouble);
  const Outputs got = run(in, p.backend, p.device, p.dtype);
  // LibTorch's own float32 error on this device sets our kernels' float32 bar.
  std::optional<Outputs> torch_f32;
  if (p.dtype == at::kFloat && !torch_backend) torch_f32 = run(in, AttentionBackend::kTorch, p.device, at::kFloat);
  for (int i = 0; i < 4; ++i) {
    const double err = error(output_at(got, i), output_at(ref, i));
    if (p.dtype == at::kFloat && torch_backend) {
      EXPECT_LE(err, kTorchFloat32Tolerance) << kOutputNames[i] << " of " << param_name(p);
    } else if (torch_f32) {
      const double torch_err = error(output_at(*torch_f32, i), output_at(ref, i));
      // Under dropout the flash backward's delta = rowsum(dO * O) comes from
      // the dropped output, whose rounding no longer cancels dP's exactly (as
      // it does without, e.g. for a row with one visible key): measured up to
      // 3.4e-6 where LibTorch's composition errs by 0 to 7e-7, hence 4e-6.
      const double floor = dropout.active() ? 4e-6 : 1e-6;
      EXPECT_LE(err, float32_factor(p) * torch_err + floor)
          << kOutputNames[i] << " of " << param_name(p) << " (torch float32 error " << torch_err
          << ")";
    } else {
      EXPECT_LE(err, kFloat64Tolerance) << kOutputNames[i] << " of " << param_name(p);
    }
  }
}

TEST_P(AttentionOp, MatchesFloat64TorchReference) {
  const auto& shapes = reference_shapes();
  for (size_t c = 0; c < shapes.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(shapes[c]));
    checked([&] { check_against_reference(GetParam(), shapes[c], 1000 + c); });
  }
}

// 1b. The same with attention dropout: every backend drops the same
// probabilities (the torch backend's composition in float64 is the
// reference; DropoutMultipliesEachProbabilityByItsOwnDraw pins down which
// ones), forward and backward, at query and key offsets past a block.
TEST_P(AttentionOp, DropoutMatchesFloat64Reference) {
  const auto& shapes = reference_shapes();
  for (size_t c = 0; c < shapes.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(shapes[c]));
    Dropout d;
    d.p = 0.3, d.seed = 0x5eed0000 + c, d.step = 11, d.site = 0x4003, d.first_row = 7;
    checked([&] { check_against_reference(GetParam(), shapes[c], 2000 + c, d); });
  }
}

// 1c. Which probability each draw multiplies, from the definition in
// attention_params.h evaluated here with the scalar generator: with q = 0
// every visible key gets probability 1/n, and with v_j the unit vector e_j
// the output is o[b, h, i, j] = M[b, h, i, j] / n. So o·n must be the
// multiplier of stream row (first_row + b)·H + h, position j, channel i:
// 0 or 1/(1-p). About p of them must be 0, and a second call with the same
// coordinates gives the same output, another step a different one.
TEST_P(AttentionOp, DropoutMultipliesEachProbabilityByItsOwnDraw) {
  const Param& p = GetParam();
  const int64_t B = 2, H = 3, Tq = 70, Tk = 66;  // past one 64-row/key block each way
  const c10::Device device(p.device);
  const auto opts = at::TensorOptions().dtype(p.dtype).device(device);
  const at::Tensor q = at::zeros({B, H, Tq, Tk}, opts), k = at::randn({B, H, Tk, Tk}, opts.dtype(at::kDouble)).to(opts);
  const at::Tensor v = at::eye(Tk, opts).expand({B, H, Tk, Tk});
  AttentionOptions o;
  o.dropout.p = 0.25, o.dropout.seed = 99, o.dropout.step = 4, o.dropout.site = 0x4000, o.dropout.first_row = 3;
  const at::Tensor out = (attention(q, k, v, o, p.backend) * Tk).to(at::kCPU, at::kDouble);  // [B, H, Tq, Tk]
  const philox::DropoutStream s = o.dropout.stream();
  const uint32_t threshold = philox::keep_threshold(s.p);
  const double keep = 1.0 / (1.0 - static_cast<double>(s.p));
  const auto acc = out.accessor<double, 4>();
  int64_t dropped = 0, wrong = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < Tk; ++j) {
          uint32_t w[4];
          philox::DropoutStream row_stream = s;
          row_stream.first_row = (o.dropout.first_row + b) * H + h;
          philox::words(row_stream, 0, j, philox::counter_of(i), w);
          const double want = w[philox::word_of(i)] >= threshold ? keep : 0.0;
          dropped += want == 0.0;
          wrong += std::abs(acc[b][h][i][j] - want) > 1e-5;
        }
  EXPECT_EQ(wrong, 0) << "of " << B * H * Tq * Tk << " multipliers, " << param_name(p);
  const double share = static_cast<double>(dropped) / static_cast<double>(B * H * Tq * Tk);
  EXPECT_NEAR(share, 0.25, 0.03) << param_name(p);
  EXPECT_TRUE(at::equal(attention(q, k, v, o, p.backend), attention(q, k, v, o, p.backend))) << param_name(p);
  AttentionOptions next = o;
  next.dropout.step = 5;
  EXPECT_FALSE(at::equal(attention(q, k, v, o, p.backend), attention(q, k, v, next, p.backend))) << param_name(p);
}

// 2. A query row that sees no key (key length 0) gives exactly zero output and
// gradients, never NaN; keys past a length get exactly zero dk and dv.
void check_masked_rows(const Param& p, const Shape& s, uint64_t seed) {
  // Batch 0 sees nothing, batch 1 everything, batch 2 its first two keys.
  const Outputs out =
      run(make_inputs(s, seed, p.dtype, std::vector<int64_t>{0, s.Tk, 2}), p.backend, p.device,
          p.dtype);
  EXPECT_TRUE(all_finite(out));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(max_abs(output_at(out, i)[0]), 0.0) << kOutputNames[i] << " of the masked batch row";
  }
  EXPECT_EQ(max_abs(out.dk[2].narrow(1, 2, s.Tk - 2)), 0.0) << "dk of keys past the length";
  EXPECT_EQ(max_abs(out.dv[2].narrow(1, 2, s.Tk - 2)), 0.0) << "dv of keys past the length";
}

// Every row of every batch masked (the torch backend has a separate path).
void check_all_masked(const Param& p, const Shape& s, uint64_t seed) {
  const Outputs out = run(make_inputs(s, seed, p.dtype, std::vector<int64_t>(s.B, 0)), p.backend,
                          p.device, p.dtype);
  EXPECT_TRUE(all_finite(out));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(max_abs(output_at(out, i)), 0.0) << kOutputNames[i];
}

TEST_P(AttentionOp, FullyMaskedRowsGiveExactZeros) {
  const std::vector<Shape> shapes = {
      {3, 2, 3, 5, 8, false},    {3, 2, 3, 5, 8, true},     {3, 1, 70, 130, 32, false},
      {3, 1, 70, 130, 32, true}, {3, 2, 130, 70, 16, true},
  };
  for (size_t c = 0; c < shapes.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(shapes[c]) + ", lengths {0, Tk, 2}");
    checked([&] { check_masked_rows(GetParam(), shapes[c], 2000 + c); });
  }
  for (bool causal : {false, true}) {
    const Shape s{2, 2, 17, 9, 8, causal};
    SCOPED_TRACE("all masked: " + describe(s) + ", lengths {0, 0}");
    checked([&] { check_all_masked(GetParam(), s, 2100); });
  }
}

// 3. q, k, v as strided views (the model's [B, T, H, D] heads viewed
// .transpose(1, 2), or a non-unit last stride) give the contiguous results.
void check_strided(const Param& p, const Shape& s, uint64_t seed) {
  // Same arithmetic on the same values: at most the summation order differs.
  // LibTorch 2.x's SDPA is the exception: it picks another kernel when the
  // last dim is not contiguous (float32 gradients then differ by up to 2.0e-6
  // relative on an H200 and 1.2e-6 on the CPU with 2.11), so float32 rounding
  // of a different algorithm is allowed there. 1.13's math path stays at 1e-6.
  const bool other_kernel = p.backend == AttentionBackend::kTorch &&
                            (p.device == c10::kCUDA || TORCH_VERSION_MAJOR >= 2);
  const double tol = p.dtype == at::kDouble ? 1e-12 : (other_kernel ? 1e-5 : 1e-6);
  const Inputs in = make_inputs(s, seed, p.dtype);
  const Outputs contiguous = run(in, p.backend, p.device, p.dtype, Layout::kContiguous);
  for (Layout layout : {Layout::kTimeMajor, Layout::kDimStrided}) {
    const Outputs strided = run(in, p.backend, p.device, p.dtype, layout);
    for (int i = 0; i < 4; ++i) {
      EXPECT_LE(error(output_at(strided, i), output_at(contiguous, i)), tol)
          << kOutputNames[i]
          << (layout == Layout::kTimeMajor ? " with [B,T,H,D].transpose(1,2) inputs"
                                           : " with [B,H,D,T].transpose(2,3) inputs");
    }
  }
}

TEST_P(AttentionOp, StridedInputsMatchContiguous) {
  const std::vector<Shape> shapes = {
      {2, 3, 17, 65, 32, true},
      {3, 2, 65, 17, 8, false},
      {4, 2, 70, 70, 80, true},
      {1, 3, 64, 130, 64, false, false},
  };
  for (size_t c = 0; c < shapes.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(shapes[c]));
    checked([&] { check_strided(GetParam(), shapes[c], 3000 + c); });
  }
}

// 4. Gradients against central finite differences of
// L(q, k, v) = sum(attention(q, k, v) * dO), in float64 on tiny shapes.
void check_finite_differences(const Param& p, const Shape& s, uint64_t seed) {
  constexpr double kEps = 1e-6;
  // Truncation error ~eps^2 and rounding error ~1e-16 / eps leave ~1e-9.
  constexpr double kTol = 1e-6;
  // Batch 0 has a key length below Tk, batch 1 all keys.
  const Inputs in = make_inputs(s, seed, at::kDouble, std::vector<int64_t>{s.Tk - 2, s.Tk});
  const Outputs analytic = run(in, p.backend, p.device, at::kDouble);
  const c10::Device device(p.device);
  const AttentionOptions options = options_on(in.options, device);
  const at::Tensor d_o = in.d_o.to(device);
  const auto loss = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    at::NoGradGuard no_grad;
    return (attention(q.to(device), k.to(device), v.to(device), options, p.backend) * d_o)
        .sum()
        .item<double>();
  };
  const char* const names[] = {"dq", "dk", "dv"};
  const at::Tensor analytic_grads[] = {analytic.dq, analytic.dk, analytic.dv};
  for (int t = 0; t < 3; ++t) {
    const at::Tensor base = (t == 0 ? in.q : t == 1 ? in.k : in.v).contiguous();
    const at::Tensor grad = analytic_grads[t].contiguous();
    // One perturbed copy of q, k or v at a time; the other two stay as they are.
    const auto loss_with = [&](const at::Tensor& x) {
      return t == 0 ? loss(x, in.k, in.v) : t == 1 ? loss(in.q, x, in.v) : loss(in.q, in.k, x);
    };
    double worst = 0;
    int64_t worst_at = -1;
    for (int64_t e = 0; e < base.numel(); ++e) {
      at::Tensor plus = base.clone(), minus = base.clone();
      plus.data_ptr<double>()[e] += kEps;
      minus.data_ptr<double>()[e] -= kEps;
      const double numeric = (loss_with(plus) - loss_with(minus)) / (2 * kEps);
      const double exact = grad.data_ptr<double>()[e];
      const double err = std::abs(numeric - exact) / std::max(1.0, std::abs(exact));
      if (!(err <= worst)) worst = err, worst_at = e;  // also catches NaN
    }
    EXPECT_LE(worst, kTol) << names[t] << " of " << param_name(p) << ", worst at flat index "
                           << worst_at;
  }
}

TEST_P(AttentionOp, GradientsMatchFiniteDifferences) {
  if (GetParam().dtype != at::kDouble) {
    GTEST_SKIP() << "finite differences need float64; the float64 case of this backend runs them";
  }
  const std::vector<Shape> shapes = {
      {2, 2, 3, 5, 4, false},
      {2, 2, 3, 5, 4, true},
      {2, 2, 5, 3, 4, true},
  };
  for (size_t c = 0; c < shapes.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(shapes[c]) +
                 ", lengths {Tk - 2, Tk}");
    checked([&] { check_finite_differences(GetParam(), shapes[c], 4000 + c); });
  }
}

// 5. attention_probs: each row is a distribution over exactly the keys it may
// see (sums to 1, zero elsewhere; all zero when it sees none), and P·V is the
// backend's output, so every backend applies those probabilities.
void check_probs(const Param& p, const Shape& s, uint64_t seed) {
  const double sum_tol = p.dtype == at::kDouble ? 1e-12 : 1e-5;
  const double pv_tol = p.dtype == at::kDouble ? 1e-10 : 1e-5;
  const Inputs in = make_inputs(s, seed, p.dtype);
  const c10::Device device(p.device);
  const AttentionOptions options = options_on(in.options, device);
  const at::Tensor q = in.q.to(device, p.dtype), k = in.k.to(device, p.dtype),
                   v = in.v.to(device, p.dtype);
  // probs: [B, H, Tq, Tk]
  const at::Tensor probs = attention_probs(q, k, options).to(at::kCPU, at::kDouble);
  ASSERT_EQ(probs.sizes(), (std::vector<int64_t>{s.B, s.H, s.Tq, s.Tk}));

  // The expected visibility, written out here rather than taken from
  // visibility_mask(), which attention_probs itself uses.
  // visible: [B, 1, Tq, Tk]
  at::Tensor visible = at::ones({s.B, 1, s.Tq, s.Tk}, at::kBool);
  const at::Tensor j = at::arange(s.Tk).view({1, 1, 1, s.Tk});
  if (s.causal) visible = visible & (j <= at::arange(s.Tq).view({1, 1, s.Tq, 1}));
  if (in.options.key_lengths.defined()) {
    visible = visible & (j < in.options.key_lengths.view({s.B, 1, 1, 1}));
  }
  visible = visible.expand({s.B, s.H, s.Tq, s.Tk});

  EXPECT_EQ(max_abs(probs.masked_select(visible.logical_not())), 0.0)
      << "probability on a masked key";
  EXPECT_GE(probs.min().item<double>(), 0.0);
  const at::Tensor row_sum = probs.sum(-1);
  const at::Tensor row_visible = visible.any(-1);
  EXPECT_LE(max_abs(row_sum.masked_select(row_visible) - 1), sum_tol)
      << "a row with visible keys does not sum to 1";
  EXPECT_EQ(max_abs(row_sum.masked_select(row_visible.logical_not())), 0.0)
      << "a row with no visible key is not all zero";

  at::NoGradGuard no_grad;
  const at::Tensor o = attention(q, k, v, options, p.backend).to(at::kCPU, at::kDouble);
  EXPECT_LE(error(o, at::matmul(probs, in.v)), pv_tol)
      << "P·V differs from the " << param_name(p) << " output";
}

TEST_P(AttentionOp, ProbsAreDistributionsOverVisibleKeys) {
  const std::vector<Shape> shapes = {
      {4, 2, 17, 65, 32, false},
      {4, 2, 17, 65, 32, true},
      {3, 1, 70, 20, 8, true},
      {2, 2, 9, 9, 16, true, false},
  };
  for (size_t c = 0; c < shapes.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + ": " + describe(shapes[c]));
    checked([&] { check_probs(GetParam(), shapes[c], 5000 + c); });
  }
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionOp, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return param_name(info.param);
                         });

// CUDA only: what the suite above cannot parameterize.
class AttentionCuda : public ::testing::TestWithParam<AttentionBackend> {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "CUDA is not available here";
#ifndef NMT_WITH_CUDA
    GTEST_SKIP() << "this build has no CUDA attention kernels";
#endif
  }
};

// bf16 inputs, as bf16 training gives them (the projections run in bf16):
// outputs and gradients against the float64 reference of the same
// bf16-rounded values. Flash runs its tensor-core forward and backward here
// (head dims in multiples of 8 up to 128: 32 and 80 padded, 64 and 128 exact;
// several key tiles; key lengths with fully masked rows); naive widens both
// ways. Everything accumulates in float32, so the error is that of rounding
// to bf16 (2^-9 relative; flash also rounds P before P V, and P and dS before
// the gradient products) and a little more.
TEST_P(AttentionCuda, Bf16InputsMatchFloat64Reference) {
  constexpr double kBf16Tolerance = 2e-2;
  const std::vector<Shape> shapes = {
      {2, 3, 37, 45, 64, false},  {2, 3, 37, 37, 64, true},    {3, 2, 150, 150, 128, true},
      {4, 1, 70, 200, 32, false}, {3, 2, 130, 65, 80, true},   {4, 2, 300, 300, 64, true},
      {1, 2, 129, 129, 128, false, false}, {2, 1, 17, 300, 8, true},
      // Keys enough for flash's dQ by atomics (kAtomicDqMinKeys).
      {2, 2, 40, 1100, 64, false},        {1, 2, 70, 1030, 128, false, false}};
  for (size_t c = 0; c < shapes.size(); ++c) {
    const Shape& s = shapes[c];
    SCOPED_TRACE(describe(s));
    const Inputs in = make_inputs(s, 77 + c, at::kBFloat16);
    const Outputs ref = run(in, AttentionBackend::kTorch, c10::kCPU, at::kDouble);
    const Outputs got = run(in, GetParam(), c10::kCUDA, at::kBFloat16);
    for (int i = 0; i < 4; ++i)
      EXPECT_LE(error(output_at(got, i), output_at(ref, i)), kBf16Tolerance)
          << kOutputNames[i] << " of " << backend_name(GetParam());
  }
}

// The flash backward adds each key block's share of dQ with float atomics,
// whose order varies from run to run: dQ may differ in its last bits, never
// by more than float32 rounding of the sum (dK, dV and the output are
// computed without atomics and must be identical).
TEST_P(AttentionCuda, RepeatedBackwardAgreesToFloat32Rounding) {
  const Shape s{2, 4, 300, 300, 64, true};
  const Inputs in = make_inputs(s, 5, at::kFloat);
  const Outputs a = run(in, GetParam(), c10::kCUDA, at::kFloat);
  const Outputs b = run(in, GetParam(), c10::kCUDA, at::kFloat);
  EXPECT_TRUE(at::equal(a.o, b.o));
  EXPECT_TRUE(at::equal(a.dk, b.dk));
  EXPECT_TRUE(at::equal(a.dv, b.dv));
  EXPECT_LE(error(a.dq, b.dq), 1e-5) << "dq run to run";
}

// Deterministic mode (torch.use_deterministic_algorithms): flash computes dQ
// without atomics, so every gradient is the same bits on every run, at
// lengths where the default mode would use atomics (flash_standalone_test
// checks that mode's gradients against float64 on every case; the shapes
// above with over 1024 keys run it here).
TEST_P(AttentionCuda, Bf16BackwardIsBitwiseRepeatable) {
  struct Deterministic {
    const bool was = at::globalContext().deterministicAlgorithms();
    const bool warn_only = at::globalContext().deterministicAlgorithmsWarnOnly();
    Deterministic() { at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true); }
    ~Deterministic() { at::globalContext().setDeterministicAlgorithms(was, warn_only); }
  } deterministic;
  const Shape s{1, 2, 1100, 1100, 64, true};
  const Inputs in = make_inputs(s, 6, at::kBFloat16);
  const Outputs a = run(in, GetParam(), c10::kCUDA, at::kBFloat16);
  const Outputs b = run(in, GetParam(), c10::kCUDA, at::kBFloat16);
  EXPECT_TRUE(at::equal(a.o, b.o));
  EXPECT_TRUE(at::equal(a.dk, b.dk));
  EXPECT_TRUE(at::equal(a.dv, b.dv));
  if (GetParam() == AttentionBackend::kFlash) EXPECT_TRUE(at::equal(a.dq, b.dq)) << "dq run to run";
}

// The GPU test above cannot tell the two dQ modes apart (on an H100 the
// atomic adds came in the same order on both runs), so the choice itself is
// checked here, without a GPU: deterministic mode never takes atomics.
TEST(AttentionCudaChoice, DeterministicModeNeverTakesAtomicDq) {
  EXPECT_TRUE(cuda::bf16_backward_uses_atomic_dq(cuda::kAtomicDqMinKeys, false));
  EXPECT_TRUE(cuda::bf16_backward_uses_atomic_dq(4096, false));
  EXPECT_FALSE(cuda::bf16_backward_uses_atomic_dq(cuda::kAtomicDqMinKeys - 1, false));
  EXPECT_FALSE(cuda::bf16_backward_uses_atomic_dq(4096, true));
  EXPECT_FALSE(cuda::bf16_backward_uses_atomic_dq(1 << 20, true));
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionCuda,
                         ::testing::Values(AttentionBackend::kNaive, AttentionBackend::kFlash),
                         [](const ::testing::TestParamInfo<AttentionBackend>& info) {
                           return backend_name(info.param);
                         });

}  // namespace
}  // namespace nmt::ops

namespace nmt::ops {
namespace {

// The model's packed form (heads in the channels of the projections) against
// attention() on [B, H, T, D] views of the same tensors: outputs and
// gradients with respect to the packed inputs, every CPU backend, with
// padding and causal masks; bf16 projections against the float32 result
// (and flash's bf16 output against its float32 output rounded).
TEST(PackedAttention, SelfAndCrossMatchAttentionOnViews) {
  const int64_t B = 3, Tq = 17, Tk = 9, H = 4, D = 8, C = H * D;
  const auto split = [&](const at::Tensor& t, int64_t col) {
    return t.narrow(2, col, C).view({t.size(0), t.size(1), H, D}).transpose(1, 2);
  };
  const auto merge = [&](const at::Tensor& o) {
    return o.transpose(1, 2).reshape({o.size(0), o.size(2), C});
  };
  // Without and with attention dropout (the packed kernels draw each head's
  // multipliers where the views' kernels do).
  for (const double drop : {0.0, 0.2}) {
    for (const auto& info : kAttentionBackends) {
      for (const at::ScalarType dt : {at::kDouble, at::kFloat, at::kBFloat16}) {
        at::manual_seed(7);
        const at::Tensor qkv64 = at::randn({B, Tq, 3 * C}, at::kDouble);
        const at::Tensor q64 = at::randn({B, Tq, C}, at::kDouble);
        const at::Tensor kv64 = at::randn({B, Tk, 2 * C}, at::kDouble);
        AttentionOptions self_opts, cross_opts;
        self_opts.causal = true;
        self_opts.key_lengths = at::tensor({17, 5, 1}, at::kLong);
        cross_opts.key_lengths = at::tensor({9, 0, 4}, at::kLong);  // a row with no key at all
        self_opts.dropout.p = cross_opts.dropout.p = drop;
        self_opts.dropout.seed = cross_opts.dropout.seed = 17;
        self_opts.dropout.site = 1, cross_opts.dropout.site = 2, self_opts.dropout.first_row = cross_opts.dropout.first_row = 4;
        // The reference: attention() on views, in float32 for bf16 inputs.
        const at::ScalarType ref_t = dt == at::kBFloat16 ? at::kFloat : dt;
        at::Tensor qkv = qkv64.to(dt).requires_grad_(true), rqkv = qkv.detach().to(ref_t).requires_grad_(true);
        at::Tensor q = q64.to(dt).requires_grad_(true), rq = q.detach().to(ref_t).requires_grad_(true);
        at::Tensor kv = kv64.to(dt).requires_grad_(true), rkv = kv.detach().to(ref_t).requires_grad_(true);
        const at::Tensor out_self = self_attention(qkv, H, self_opts, info.value);
        const at::Tensor out_cross = cross_attention(q, kv, H, cross_opts, info.value);
        const at::Tensor ref_self =
            merge(attention(split(rqkv, 0), split(rqkv, C), split(rqkv, 2 * C), self_opts, AttentionBackend::kTorch));
        const at::Tensor ref_cross =
            merge(attention(split(rq, 0), split(rkv, 0), split(rkv, C), cross_opts, AttentionBackend::kTorch));
        const double tol = dt == at::kDouble ? 1e-10 : dt == at::kFloat ? 1e-5 : 3e-2;
        const std::string what = std::string(info.name) + " " + c10::toString(dt) + " dropout " + std::to_string(drop);
        EXPECT_EQ(out_self.sizes(), (std::vector<int64_t>{B, Tq, C})) << what;
        EXPECT_EQ(out_self.scalar_type(), dt) << what;
        EXPECT_LT((out_self.to(at::kDouble) - ref_self.to(at::kDouble)).abs().max().item<double>(), tol) << what;
        EXPECT_LT((out_cross.to(at::kDouble) - ref_cross.to(at::kDouble)).abs().max().item<double>(), tol) << what;
        EXPECT_EQ(out_cross[1].abs().max().item<double>(), 0.0) << what;  // no visible key: zeros
        if (dt == at::kBFloat16 && info.value == AttentionBackend::kFlash) {
          // flash reads and writes bf16 itself, computing in float32: the
          // float32 kernels' output on the widened inputs, rounded, bit for bit.
          at::NoGradGuard no_grad;
          const at::Tensor self32 = self_attention(qkv.detach().to(at::kFloat), H, self_opts, info.value);
          const at::Tensor cross32 =
              cross_attention(q.detach().to(at::kFloat), kv.detach().to(at::kFloat), H, cross_opts, info.value);
          EXPECT_TRUE(at::equal(out_self, self32.to(at::kBFloat16))) << what;
          EXPECT_TRUE(at::equal(out_cross, cross32.to(at::kBFloat16))) << what;
        }
        const at::Tensor up1 = at::randn({B, Tq, C}, at::kDouble), up2 = at::randn({B, Tq, C}, at::kDouble);
        ((out_self.to(at::kDouble) * up1).sum() + (out_cross.to(at::kDouble) * up2).sum()).backward();
        ((ref_self.to(at::kDouble) * up1).sum() + (ref_cross.to(at::kDouble) * up2).sum()).backward();
        for (const auto& [got, ref] : {std::pair{qkv, rqkv}, std::pair{q, rq}, std::pair{kv, rkv}})
          EXPECT_LT((got.grad().to(at::kDouble) - ref.grad().to(at::kDouble)).abs().max().item<double>(), tol * 4)
              << what << " gradient";
      }
    }
  }
}


// Sentences packed one after another (AttentionOptions::query_starts,
// key_starts; the training encoder's rows without padding) against the same
// sentences padded: flash on the CPU computes each sentence alike either way,
// so outputs and gradients agree bit for bit. Self-attention causal and not,
// cross-attention from padded queries to packed keys, with and without
// attention dropout, a sentence of no token, sentences longer than a query
// block and batches short enough for the row kernel.
TEST(PackedAttention, SentencesOneAfterAnotherMatchPadded) {
  const int64_t H = 2, D = 8, C = H * D;
  // rows [starts[b], starts[b + 1]) of a [1, N, W] tensor as batch row b of [B, S, W] (zeros past its length)
  const auto pad = [](const at::Tensor& packed, const std::vector<int64_t>& len, int64_t width) {
    at::Tensor out = at::zeros({static_cast<int64_t>(len.size()), width, packed.size(2)}, packed.options());
    for (int64_t b = 0, row = 0; b < static_cast<int64_t>(len.size()); row += len[b], ++b)
      out[b].narrow(0, 0, len[b]).copy_(packed[0].narrow(0, row, len[b]));
    return out;
  };
  const auto unpad = [](const at::Tensor& padded, const std::vector<int64_t>& len) {
    std::vector<at::Tensor> rows;
    for (int64_t b = 0; b < static_cast<int64_t>(len.size()); ++b) rows.push_back(padded[b].narrow(0, 0, len[b]));
    return at::cat(rows).unsqueeze(0);
  };
  for (const std::vector<int64_t>& len : {std::vector<int64_t>{70, 3, 0, 17}, std::vector<int64_t>{3, 1, 0, 2}}) {
    const int64_t B = static_cast<int64_t>(len.size()), S = *std::max_element(len.begin(), len.end());
    const int64_t N = std::accumulate(len.begin(), len.end(), int64_t{0}), Tq = 5;
    const at::Tensor lengths = at::tensor(len, at::kLong), starts = packed_starts(lengths);
    for (const at::ScalarType dt : {at::kDouble, at::kFloat, at::kBFloat16}) {
      for (const double drop : {0.0, 0.2}) {
        for (const bool causal : {false, true}) {
          at::manual_seed(3);
          const std::string what = std::string(c10::toString(dt)) + " S " + std::to_string(S) + " dropout " +
                                   std::to_string(drop) + (causal ? " causal" : "");
          const at::Tensor qkv = at::randn({1, N, 3 * C}, at::kDouble).to(dt);
          const at::Tensor kv = at::randn({1, N, 2 * C}, at::kDouble).to(dt);
          const at::Tensor q = at::randn({B, Tq, C}, at::kDouble).to(dt);
          const at::Tensor up_self = at::randn({1, N, C}, at::kDouble).to(dt);
          const at::Tensor up_cross = at::randn({B, Tq, C}, at::kDouble).to(dt);
          AttentionOptions packed, padded;
          packed.causal = padded.causal = causal;
          packed.dropout.p = padded.dropout.p = drop;
          packed.dropout.seed = padded.dropout.seed = 5, packed.dropout.site = padded.dropout.site = 3;
          packed.query_starts = packed.key_starts = starts;
          padded.key_lengths = lengths;
          AttentionOptions packed_keys = packed;  // cross-attention: padded queries
          packed_keys.query_starts = at::Tensor();
          packed_keys.causal = false;

          // packed
          const at::Tensor a_qkv = qkv.clone().requires_grad_(true), a_kv = kv.clone().requires_grad_(true),
                           a_q = q.clone().requires_grad_(true);
          const at::Tensor a_self = self_attention(a_qkv, H, packed, AttentionBackend::kFlash);
          AttentionOptions cross_padded = padded;
          cross_padded.causal = false;
          const at::Tensor a_cross = cross_attention(a_q, a_kv, H, packed_keys, AttentionBackend::kFlash);
          ((a_self * up_self).sum() + (a_cross * up_cross).sum()).backward();
          // padded
          const at::Tensor b_qkv = pad(qkv, len, S).requires_grad_(true), b_kv = pad(kv, len, S).requires_grad_(true),
                           b_q = q.clone().requires_grad_(true);
          const at::Tensor b_self = self_attention(b_qkv, H, padded, AttentionBackend::kFlash);
          const at::Tensor b_cross = cross_attention(b_q, b_kv, H, cross_padded, AttentionBackend::kFlash);
          ((b_self * pad(up_self, len, S)).sum() + (b_cross * up_cross).sum()).backward();

          EXPECT_EQ(a_self.sizes(), (std::vector<int64_t>{1, N, C})) << what;
          EXPECT_TRUE(at::equal(a_self, unpad(b_self, len))) << what;
          EXPECT_TRUE(at::equal(a_cross, b_cross)) << what;
          // Gradients bit for bit too, attention dropout included.
          EXPECT_TRUE(at::equal(a_qkv.grad(), unpad(b_qkv.grad(), len))) << what << " dqkv";
          EXPECT_TRUE(at::equal(a_kv.grad(), unpad(b_kv.grad(), len))) << what << " dkv";
          EXPECT_TRUE(at::equal(a_q.grad(), b_q.grad())) << what << " dq";
        }
      }
    }
  }
}

// Cross-attention with both sides packed (the decoder's target rows reading
// the encoder's source rows), where the sides' sentence lengths differ and
// one sentence has keys but no query row: that sentence's keys and values
// get exactly zero gradient, the others match padded cross-attention bit
// for bit. Key blocks write their gradients from their first query block,
// so a sentence no query reaches must not leave a block's scratch behind.
TEST(PackedAttention, BothSidesPackedWithASentenceOfNoQuery) {
  const int64_t H = 2, D = 8, C = H * D;
  const std::vector<int64_t> q_len{5, 0, 3, 70}, k_len{4, 6, 0, 9};
  const int64_t B = 4, Tq = 70, Tk = 9, Nq = 78, Nk = 19;
  const at::Tensor q_starts = packed_starts(at::tensor(q_len, at::kLong));
  const at::Tensor k_starts = packed_starts(at::tensor(k_len, at::kLong));
  for (const at::ScalarType dt : {at::kDouble, at::kFloat}) {
    at::manual_seed(11);
    const at::Tensor q = at::randn({1, Nq, C}, at::kDouble).to(dt).requires_grad_(true);
    const at::Tensor kv = at::randn({1, Nk, 2 * C}, at::kDouble).to(dt).requires_grad_(true);
    const at::Tensor up = at::randn({1, Nq, C}, at::kDouble).to(dt);
    AttentionOptions packed;
    packed.query_starts = q_starts, packed.key_starts = k_starts;
    const at::Tensor out = cross_attention(q, kv, H, packed, AttentionBackend::kFlash);
    (out * up).sum().backward();
    // The same sentences padded: queries to Tq rows (zero upstream gradient
    // past a sentence's end), keys to Tk with key_lengths.
    at::Tensor pq = at::zeros({B, Tq, C}, q.options()), pkv = at::zeros({B, Tk, 2 * C}, kv.options());
    at::Tensor pup = at::zeros({B, Tq, C}, up.options());
    for (int64_t b = 0, qr = 0, kr = 0; b < B; qr += q_len[b], kr += k_len[b], ++b) {
      pq[b].narrow(0, 0, q_len[b]).copy_(q.detach()[0].narrow(0, qr, q_len[b]));
      pup[b].narrow(0, 0, q_len[b]).copy_(up[0].narrow(0, qr, q_len[b]));
      pkv[b].narrow(0, 0, k_len[b]).copy_(kv.detach()[0].narrow(0, kr, k_len[b]));
    }
    pq.requires_grad_(true), pkv.requires_grad_(true);
    AttentionOptions padded;
    padded.key_lengths = at::tensor(k_len, at::kLong);
    const at::Tensor pout = cross_attention(pq, pkv, H, padded, AttentionBackend::kFlash);
    (pout * pup).sum().backward();
    const std::string what = c10::toString(dt);
    for (int64_t b = 0, qr = 0, kr = 0; b < B; qr += q_len[b], kr += k_len[b], ++b) {
      const std::string which = what + " sentence " + std::to_string(b);
      EXPECT_TRUE(at::equal(out[0].narrow(0, qr, q_len[b]), pout[b].narrow(0, 0, q_len[b]))) << which;
      EXPECT_TRUE(at::equal(q.grad()[0].narrow(0, qr, q_len[b]), pq.grad()[b].narrow(0, 0, q_len[b]))) << which;
      const at::Tensor dkv = kv.grad()[0].narrow(0, kr, k_len[b]);
      EXPECT_TRUE(at::equal(dkv, pkv.grad()[b].narrow(0, 0, k_len[b]))) << which;
      if (q_len[b] == 0) EXPECT_EQ(dkv.abs().max().item<double>(), 0.0) << which << ": keys no query sees";
    }
  }
}

// Packed sentences are flash's on the CPU, with starts that cover the rows.
TEST(PackedAttention, PackedSentencesRefuseOtherBackendsAndBadStarts) {
  const at::Tensor qkv = at::randn({1, 6, 3 * 8});
  const auto fails = [&](const at::Tensor& starts, AttentionBackend backend, const std::string& want) {
    AttentionOptions o;
    o.query_starts = o.key_starts = starts;
    try {
      self_attention(qkv, 2, o, backend);
      ADD_FAILURE() << "taken: " << want;
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  const at::Tensor good = at::tensor({0, 4, 6}, at::kLong);
  fails(good, AttentionBackend::kNaive, "take CPU flash");
  fails(good, AttentionBackend::kTorch, "take CPU flash");
  fails(at::tensor({0, 4, 5}, at::kLong), AttentionBackend::kFlash, "must run from 0 to the 6 rows");
  fails(at::tensor({0, 5, 4, 6}, at::kLong), AttentionBackend::kFlash, "must not decrease");
  AttentionOptions o;
  o.query_starts = o.key_starts = good;
  EXPECT_EQ(self_attention(qkv, 2, o, AttentionBackend::kFlash).sizes(), (std::vector<int64_t>{1, 6, 8}));
  // Packed queries against padded keys: one padded row per sentence.
  AttentionOptions cross;
  cross.query_starts = good;
  try {
    cross_attention(at::randn({1, 6, 8}), at::randn({3, 4, 16}), 2, cross, AttentionBackend::kFlash);
    ADD_FAILURE() << "taken: 3 padded key rows for 2 sentences";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("padded keys of batch 3 for 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cross_attention(at::randn({1, 6, 8}), at::randn({2, 4, 16}), 2, cross, AttentionBackend::kFlash).sizes(),
            (std::vector<int64_t>{1, 6, 8}));
}

// bf16 reaches the CPU kernels only through the packed projections above:
// q, k, v views in bf16 are refused by every CPU backend, with a message.
TEST(PackedAttention, CpuViewsInBf16AreRefused) {
  const at::Tensor x = at::randn({1, 2, 5, 8}).to(at::kBFloat16);
  for (const AttentionBackend b : {AttentionBackend::kNaive, AttentionBackend::kFlash}) {
    try {
      attention(x, x, x, AttentionOptions{}, b);
      ADD_FAILURE() << "bf16 views were taken";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("float32 or float64"), std::string::npos) << e.what();
    }
  }
}

// The packed form on a GPU in bf16 (flash's kernels reading the heads where
// they lie in the projections and writing the gradients into one buffer per
// input) against attention() on views in float64 on the CPU: self-attention
// causal with padding, cross-attention with a row that sees no key, head dims
// 32 and 64, and keys enough for dQ by atomics.
TEST(PackedAttention, CudaBf16MatchesAttentionOnViews) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "CUDA is not available here";
#ifndef NMT_WITH_CUDA
  GTEST_SKIP() << "this build has no CUDA attention kernels";
#endif
  glue::set_cuda_fused_ops(true);
  struct Case {
    int64_t b, tq, tk, h, d;
  };
  for (const Case& c : {Case{3, 17, 9, 4, 8}, Case{3, 40, 33, 4, 64}, Case{2, 70, 1100, 2, 32}}) {
    const int64_t B = c.b, Tq = c.tq, Tk = c.tk, H = c.h, D = c.d, C = H * D;
    const auto split = [&](const at::Tensor& t, int64_t col) {
      return t.narrow(2, col, C).view({t.size(0), t.size(1), H, D}).transpose(1, 2);
    };
    const auto merge = [&](const at::Tensor& o) { return o.transpose(1, 2).reshape({o.size(0), o.size(2), C}); };
    at::manual_seed(11);
    const auto cuda_bf16 = at::TensorOptions(at::kBFloat16).device(at::kCUDA);
    at::Tensor qkv = at::randn({B, Tq, 3 * C}, cuda_bf16).requires_grad_(true);
    at::Tensor q = at::randn({B, Tq, C}, cuda_bf16).requires_grad_(true);
    at::Tensor kv = at::randn({B, Tk, 2 * C}, cuda_bf16).requires_grad_(true);
    const auto ref_leaf = [](const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble).requires_grad_(true); };
    at::Tensor rqkv = ref_leaf(qkv), rq = ref_leaf(q), rkv = ref_leaf(kv);
    AttentionOptions self_opts, cross_opts;
    self_opts.causal = true;
    self_opts.key_lengths = at::tensor(std::vector<int64_t>{Tq, 5, 1}, at::kLong).narrow(0, 0, B);
    cross_opts.key_lengths = at::tensor(std::vector<int64_t>{Tk, 0, 4}, at::kLong).narrow(0, 0, B);  // row 1: no key
    const at::Tensor out_self = self_attention(qkv, H, self_opts, AttentionBackend::kFlash);
    const at::Tensor out_cross = cross_attention(q, kv, H, cross_opts, AttentionBackend::kFlash);
    const std::string what = "B " + std::to_string(B) + " Tq " + std::to_string(Tq) + " Tk " + std::to_string(Tk) +
                             " D " + std::to_string(D);
    for (const at::Tensor& o : {out_self, out_cross}) {
      ASSERT_TRUE(o.grad_fn() != nullptr) << what;
      EXPECT_NE(o.grad_fn()->name().find("PackedFlashBf16Function"), std::string::npos)
          << what << ": ran " << o.grad_fn()->name();
      EXPECT_EQ(o.sizes(), (std::vector<int64_t>{B, Tq, C})) << what;
    }
    const at::Tensor ref_self =
        merge(attention(split(rqkv, 0), split(rqkv, C), split(rqkv, 2 * C), self_opts, AttentionBackend::kTorch));
    const at::Tensor ref_cross =
        merge(attention(split(rq, 0), split(rkv, 0), split(rkv, C), cross_opts, AttentionBackend::kTorch));
    const auto err = [](const at::Tensor& a, const at::Tensor& b) {
      const at::Tensor bd = b.to(at::kCPU, at::kDouble);
      return (a.to(at::kCPU, at::kDouble) - bd).abs().max().item<double>() / std::max(1.0, bd.abs().max().item<double>());
    };
    constexpr double kTol = 2e-2;  // bf16 rounding, as Bf16InputsMatchFloat64Reference
    EXPECT_LT(err(out_self, ref_self), kTol) << what;
    EXPECT_LT(err(out_cross, ref_cross), kTol) << what;
    EXPECT_EQ(out_cross[1].abs().max().item<double>(), 0.0) << what;  // no visible key: zeros
    const at::Tensor up1 = at::randn({B, Tq, C}, at::kDouble), up2 = at::randn({B, Tq, C}, at::kDouble);
    ((out_self.to(at::kCPU, at::kDouble) * up1).sum() + (out_cross.to(at::kCPU, at::kDouble) * up2).sum()).backward();
    ((ref_self * up1).sum() + (ref_cross * up2).sum()).backward();
    for (const auto& [got, ref, name] : {std::tuple{qkv, rqkv, "dqkv"}, std::tuple{q, rq, "dq"}, std::tuple{kv, rkv, "dkv"}})
      EXPECT_LT(err(got.grad(), ref.grad()), kTol) << what << " " << name;
  }
}

// kv_rows: query row b reads the keys and values at batch index kv_rows[b]
// (a beam's hypotheses sharing their sentence's encoder output). The CPU
// forward kernels give exactly what they give on k and v gathered row by
// row: the row kernel (Tq 1, decoding), the block kernel (Tq 70), naive,
// float32 and float64, keys masked per query row.
template <typename T>
void check_kv_rows(bool naive, int64_t tq) {
  constexpr int64_t B = 5, KB = 3, H = 2, Tk = 23, D = 16;
  const std::vector<int64_t> kv_rows = {2, 0, 2, 1, 0}, key_lengths = {23, 9, 1, 17, 0};
  const auto opts = at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
  at::manual_seed(11);
  const at::Tensor q = at::randn({B, H, tq, D}, opts), k = at::randn({KB, H, Tk, D}, opts);
  const at::Tensor v = at::randn({KB, H, Tk, D}, opts);
  const at::Tensor index = at::tensor(kv_rows, at::kLong);
  const at::Tensor k_rows = k.index_select(0, index).contiguous(), v_rows = v.index_select(0, index).contiguous();
  const auto run = [&](const at::Tensor& kk, const at::Tensor& vv, const int64_t* rows) {
    at::Tensor o = at::empty({B, H, tq, D}, opts), lse = at::empty({B, H, tq}, opts);
    at::Tensor probs = at::empty({B, H, tq, Tk}, opts);
    AttentionForwardParams<T> a{};
    a.q = q.data_ptr<T>(), a.k = kk.data_ptr<T>(), a.v = vv.data_ptr<T>(), a.o = o.data_ptr<T>();
    a.lse = lse.data_ptr<T>(), a.probs = probs.data_ptr<T>(), a.key_lengths = key_lengths.data(), a.kv_rows = rows;
    a.q_stride_b = H * tq * D, a.q_stride_h = tq * D, a.q_stride_t = D;
    a.k_stride_b = a.v_stride_b = H * Tk * D, a.k_stride_h = a.v_stride_h = Tk * D, a.k_stride_t = a.v_stride_t = D;
    a.o_stride_b = H * tq * D, a.o_stride_h = tq * D, a.o_stride_t = D;
    a.batch = B, a.heads = H, a.q_len = tq, a.k_len = Tk, a.head_dim = D;
    a.scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    a.causal = false;
    if (naive) {
      cpu::naive_attention_forward(a);
    } else {
      cpu::flash_attention_forward(a);
    }
    return o;
  };
  const at::Tensor shared = run(k, v, kv_rows.data()), gathered = run(k_rows, v_rows, nullptr);
  EXPECT_TRUE(at::equal(shared, gathered)) << "largest difference "
                                           << (shared - gathered).abs().max().item<double>();
  // Row 4 sees no key: zeros.
  EXPECT_EQ(shared[4].abs().max().item<double>(), 0.0);
}

TEST(AttentionKvRows, EachQueryRowReadsItsMappedKeysAndValues) {
  for (const bool naive : {false, true})
    for (const int64_t tq : {1, 70}) {
      SCOPED_TRACE(std::string(naive ? "naive" : "flash") + ", Tq " + std::to_string(tq));
      check_kv_rows<float>(naive, tq);
      check_kv_rows<double>(naive, tq);
    }
}

}  // namespace
}  // namespace nmt::ops
