// Standalone correctness test (and optional benchmark) for the CUDA attention
// kernels: no LibTorch, no GoogleTest, only the CUDA runtime.
//
// For each case it fills random q / k / v / dO on the host, runs the flash and
// naive forward and backward on the GPU and compares o, lse, dq, dk, dv
// against a double-precision CPU loop reference. Where the bf16 tensor-core
// forward applies, it also runs that on q / k / v rounded to bf16 against the
// reference of the rounded values (o and lse), then the tensor-core backward
// (dq, dk, dv, and the same bits on a second run).
//
// Output: one line per case, then "N passed, N failed". Exit code 0 if every
// case passes, 1 otherwise, 77 (the CTest / automake "skipped" code) when no
// CUDA device is present.
//
//   flash_standalone_test            run the correctness cases
//   flash_standalone_test --bench    also time B=8, H=8, T=4096, D=64
//   flash_standalone_test --bench-tilings
//                                    also time every tiling of the bf16 forward and
//                                    of the backward's dK/dV kernel
//   flash_standalone_test --no-cases ...   only the benchmarks asked for
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/attention/cuda/attention_cuda.h"

namespace {

using nmt::ops::AttentionBackwardParams;
using nmt::ops::AttentionForwardParams;
namespace cuda_ops = nmt::ops::cuda;

constexpr int kSkipExitCode = 77;
// Tolerances for float32 kernels against the double reference: |got - ref| <=
// kAtol + kRtol * |ref|. Float32 accumulation over a few hundred keys is good
// to ~1e-6 relative; index or masking bugs show up as errors of order 0.1.
constexpr double kAtol = 2e-4;
constexpr double kRtol = 2e-3;
// The bf16 forward's o: rounded to bf16 (2^-9 relative), with P rounded to
// bf16 before P V (2^-9 relative per term, averaging out over the keys).
constexpr double kBf16Atol = 4e-3;
constexpr double kBf16Rtol = 1e-2;
// The bf16 backward's gradients: inputs and dO are exact bf16 values, but P
// and dS are rounded to bf16 before they enter a product, and the gradients
// are stored as bf16.
constexpr double kBf16GradAtol = 2e-2;
constexpr double kBf16GradRtol = 2e-2;

// Memory layout of the q / k / v inputs.
enum class Layout {
  kContiguous,  // [B, H, T, D]
  kBTHD,        // [B, T, H, D] storage seen as [B, H, T, D] (a transpose view)
};

struct Case {
  std::string name;
  int64_t batch, heads, q_len, k_len, head_dim;
  bool causal;
  std::vector<int64_t> key_lengths;  // empty: no key-length mask (null pointer)
  Layout layout = Layout::kContiguous;
  int64_t row_pad = 0;  // extra floats after each D-row (pitch != D, possibly unaligned)
};

// Strides (in elements) of one [B, H, T, D] input, plus its storage size.
struct Strides {
  int64_t b, h, t, size;
};

Strides make_strides(const Case& c, int64_t len) {
  const int64_t pitch = c.head_dim + c.row_pad;
  Strides s{};
  if (c.layout == Layout::kContiguous) {
    s.t = pitch;
    s.h = len * s.t;
    s.b = c.heads * s.h;
  } else {
    s.h = pitch;
    s.t = c.heads * s.h;
    s.b = len * s.t;
  }
  s.size = std::max<int64_t>(c.batch * s.b, 1);
  return s;
}

// ---------------------------------------------------------------------------
// Double-precision reference.
// ---------------------------------------------------------------------------
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;  // contiguous [B, H, T, D] / [B, H, Tq]
};

Reference reference(const Case& c, const std::vector<float>& q, const Strides& qs,
                    const std::vector<float>& k, const Strides& ks, const std::vector<float>& v,
                    const Strides& vs, const std::vector<float>& d_o, float scale) {
  const int64_t B = c.batch, H = c.heads, Tq = c.q_len, Tk = c.k_len, D = c.head_dim;
  Reference r;
  r.o.assign(B * H * Tq * D, 0.0);
  r.lse.assign(B * H * Tq, -INFINITY);
  r.dq.assign(B * H * Tq * D, 0.0);
  r.dk.assign(B * H * Tk * D, 0.0);
  r.dv.assign(B * H * Tk * D, 0.0);
  std::vector<double> prob(Tk), dprob(Tk);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t key_len = c.key_lengths.empty() ? Tk : c.key_lengths[b];
    for (int64_t h = 0; h < H; ++h) {
      auto q_at = [&](int64_t t, int64_t d) {
        return double(q[b * qs.b + h * qs.h + t * qs.t + d]);
      };
      auto k_at = [&](int64_t t, int64_t d) {
        return double(k[b * ks.b + h * ks.h + t * ks.t + d]);
      };
      auto v_at = [&](int64_t t, int64_t d) {
        return double(v[b * vs.b + h * vs.h + t * vs.t + d]);
      };
      const int64_t bh = b * H + h;
      for (int64_t i = 0; i < Tq; ++i) {
        // Forward row i.
        double row_max = -INFINITY;
        for (int64_t j = 0; j < Tk; ++j) {
          const bool visible = j < key_len && (!c.causal || j <= i);
          if (!visible) {
            prob[j] = -INFINITY;
            continue;
          }
          double s = 0.0;
          for (int64_t d = 0; d < D; ++d) s += q_at(i, d) * k_at(j, d);
          prob[j] = s * scale;
          row_max = std::max(row_max, prob[j]);
        }
        if (row_max == -INFINITY) continue;  // no visible key: o = 0, lse = -inf, grads 0
        double sum = 0.0;
        for (int64_t j = 0; j < Tk; ++j)
          sum += prob[j] == -INFINITY ? 0.0 : std::exp(prob[j] - row_max);
        for (int64_t j = 0; j < Tk; ++j)
          prob[j] = prob[j] == -INFINITY ? 0.0 : std::exp(prob[j] - row_max) / sum;
        r.lse[bh * Tq + i] = row_max + std::log(sum);
        double* o_row = &r.o[(bh * Tq + i) * D];
        for (int64_t j = 0; j < Tk; ++j)
          for (int64_t d = 0; d < D; ++d) o_row[d] += prob[j] * v_at(j, d);

        // Backward row i: dP, dV, dS, dQ, dK.
        const float* do_row = &d_o[(bh * Tq + i) * D];
        double delta = 0.0;
        for (int64_t j = 0; j < Tk; ++j) {
          double dp = 0.0;
          for (int64_t d = 0; d < D; ++d) dp += double(do_row[d]) * v_at(j, d);
          dprob[j] = dp;
          delta += prob[j] * dp;
          for (int64_t d = 0; d < D; ++d) r.dv[(bh * Tk + j) * D + d] += prob[j] * do_row[d];
        }
        for (int64_t j = 0; j < Tk; ++j) {
          const double ds = prob[j] * (dprob[j] - delta) * scale;
          if (ds == 0.0) continue;
          for (int64_t d = 0; d < D; ++d) {
            r.dq[(bh * Tq + i) * D + d] += ds * k_at(j, d);
            r.dk[(bh * Tk + j) * D + d] += ds * q_at(i, d);
          }
        }
      }
    }
  }
  return r;
}

// ---------------------------------------------------------------------------
// Device helpers.
// ---------------------------------------------------------------------------
#define CHECK_CUDA(expr)                                                 \
  do {                                                                   \
    const cudaError_t err_ = (expr);                                     \
    if (err_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(err_));                            \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

// Owning device allocation of floats (or int64) that frees itself.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t count) : count_(std::max<int64_t>(count, 1)) {
    CHECK_CUDA(cudaMalloc(&ptr_, count_ * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }

  T* get() const { return ptr_; }
  void upload(const std::vector<T>& host) {
    CHECK_CUDA(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download(int64_t count) const {
    std::vector<T> host(count);
    if (count > 0)
      CHECK_CUDA(cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Poisons the buffer with NaN bytes so unwritten outputs cannot pass.
  void poison() { CHECK_CUDA(cudaMemset(ptr_, 0xff, count_ * sizeof(T))); }

 private:
  T* ptr_ = nullptr;
  int64_t count_;
};

// Worst |got - ref| / (atol + rtol |ref|) over a tensor; NaN or a missing /
// extra -inf counts as infinitely bad.
double worst_error(const std::vector<float>& got, const std::vector<double>& ref,
                   double atol = kAtol, double rtol = kRtol) {
  double worst = 0.0;
  for (size_t n = 0; n < ref.size(); ++n) {
    const double g = got[n];
    const double r = ref[n];
    if (std::isinf(r) || std::isinf(g)) {
      if (!(g == r)) return INFINITY;
      continue;
    }
    const double ratio = std::fabs(g - r) / (atol + rtol * std::fabs(r));
    if (!(ratio <= worst)) worst = std::isnan(ratio) ? INFINITY : ratio;
  }
  return worst;
}

std::vector<float> random_vector(int64_t n, std::mt19937& rng, float bound) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<float> out(n);
  for (auto& x : out) x = dist(rng);
  return out;
}

// Runs one case; returns true if every output of both kernels matches.
bool run_case(const Case& c, int index) {
  const int64_t B = c.batch, H = c.heads, Tq = c.q_len, Tk = c.k_len, D = c.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::mt19937 rng(1234 + index);
  const Strides qs = make_strides(c, Tq);
  const Strides ks = make_strides(c, Tk);
  const Strides vs = ks;
  const auto q = random_vector(qs.size, rng, 2.0f);
  const auto k = random_vector(ks.size, rng, 2.0f);
  const auto v = random_vector(vs.size, rng, 1.0f);
  const auto d_o = random_vector(B * H * Tq * D, rng, 1.0f);
  const Reference ref = reference(c, q, qs, k, ks, v, vs, d_o, scale);

  DeviceBuffer<float> q_d(qs.size), k_d(ks.size), v_d(vs.size), do_d(B * H * Tq * D);
  q_d.upload(q);
  k_d.upload(k);
  v_d.upload(v);
  do_d.upload(d_o);
  DeviceBuffer<int64_t> len_d(B);
  if (!c.key_lengths.empty()) len_d.upload(c.key_lengths);
  DeviceBuffer<float> o_d(B * H * Tq * D), lse_d(B * H * Tq);
  DeviceBuffer<float> dq_d(B * H * Tq * D), dk_d(B * H * Tk * D), dv_d(B * H * Tk * D);
  DeviceBuffer<float> delta_d(B * H * Tq), dq_accum_d(B * H * Tq * D);
  DeviceBuffer<float> probs_d(B * H * Tq * Tk), dscratch_d(B * H * Tq * Tk);

  AttentionForwardParams<float> fp{};
  fp.q = q_d.get();
  fp.k = k_d.get();
  fp.v = v_d.get();
  fp.o = o_d.get();
  fp.lse = lse_d.get();
  fp.probs = nullptr;
  fp.key_lengths = c.key_lengths.empty() ? nullptr : len_d.get();
  fp.q_stride_b = qs.b, fp.q_stride_h = qs.h, fp.q_stride_t = qs.t;
  fp.k_stride_b = ks.b, fp.k_stride_h = ks.h, fp.k_stride_t = ks.t;
  fp.v_stride_b = vs.b, fp.v_stride_h = vs.h, fp.v_stride_t = vs.t;
  fp.batch = B, fp.heads = H, fp.q_len = Tq, fp.k_len = Tk, fp.head_dim = D;
  fp.scale = scale;
  fp.causal = c.causal;

  AttentionBackwardParams<float> bp{};
  bp.q = fp.q, bp.k = fp.k, bp.v = fp.v;
  bp.o = o_d.get();
  bp.lse = lse_d.get();
  bp.probs = nullptr;
  bp.d_o = do_d.get();
  bp.dq = dq_d.get(), bp.dk = dk_d.get(), bp.dv = dv_d.get();
  bp.key_lengths = fp.key_lengths;
  bp.q_stride_b = qs.b, bp.q_stride_h = qs.h, bp.q_stride_t = qs.t;
  bp.k_stride_b = ks.b, bp.k_stride_h = ks.h, bp.k_stride_t = ks.t;
  bp.v_stride_b = vs.b, bp.v_stride_h = vs.h, bp.v_stride_t = vs.t;
  bp.batch = B, bp.heads = H, bp.q_len = Tq, bp.k_len = Tk, bp.head_dim = D;
  bp.scale = scale;
  bp.causal = c.causal;

  std::string detail;
  bool ok = true;
  auto report = [&](const char* what, double err) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %s=%.3g", what, err);
    detail += buf;
    if (!(err <= 1.0)) ok = false;
  };
  auto check_call = [&](const char* what, int rc) {
    const cudaError_t sync = cudaDeviceSynchronize();
    if (rc != 0 || sync != cudaSuccess) {
      detail += std::string(" ") + what +
                " failed: " + cudaGetErrorString(rc != 0 ? static_cast<cudaError_t>(rc) : sync);
      ok = false;
      return false;
    }
    return true;
  };
  auto check_grads = [&](const char* prefix) {
    report((std::string(prefix) + "dq").c_str(),
           worst_error(dq_d.download(B * H * Tq * D), ref.dq));
    report((std::string(prefix) + "dk").c_str(),
           worst_error(dk_d.download(B * H * Tk * D), ref.dk));
    report((std::string(prefix) + "dv").c_str(),
           worst_error(dv_d.download(B * H * Tk * D), ref.dv));
  };
  auto poison_outputs = [&] {
    o_d.poison(), lse_d.poison(), dq_d.poison(), dk_d.poison(), dv_d.poison();
    delta_d.poison(), dq_accum_d.poison(), dscratch_d.poison(), probs_d.poison();
  };

  // Flash: forward, then backward from the flash o / lse. Odd cases pass no
  // dq_accum, so dq itself is the atomic accumulator.
  poison_outputs();
  if (check_call("flash fwd", cuda_ops::flash_attention_forward(fp, nullptr))) {
    report("f.o", worst_error(o_d.download(B * H * Tq * D), ref.o));
    report("f.lse", worst_error(lse_d.download(B * H * Tq), ref.lse));
    float* accum = index % 2 == 0 ? dq_accum_d.get() : nullptr;
    if (check_call("flash bwd",
                   cuda_ops::flash_attention_backward(bp, delta_d.get(), accum, nullptr)))
      check_grads("f.");
  }

  // Naive: forward (probs kept), then backward from the stored probs.
  poison_outputs();
  fp.probs = probs_d.get();
  bp.probs = probs_d.get();
  if (check_call("naive fwd", cuda_ops::naive_attention_forward(fp, nullptr))) {
    report("n.o", worst_error(o_d.download(B * H * Tq * D), ref.o));
    report("n.lse", worst_error(lse_d.download(B * H * Tq), ref.lse));
    if (check_call("naive bwd", cuda_ops::naive_attention_backward(bp, dscratch_d.get(), nullptr)))
      check_grads("n.");
  }

  // bf16 tensor-core forward, where it applies.
  {
    using nmt::ops::bf16;
    const auto round = [](const std::vector<float>& x, std::vector<bf16>& bits) {
      std::vector<float> rounded(x.size());
      bits.resize(x.size());
      for (size_t n = 0; n < x.size(); ++n) {
        bits[n] = nmt::ops::to_bf16(x[n]);
        rounded[n] = nmt::ops::to_float(bits[n]);
      }
      return rounded;
    };
    std::vector<bf16> q_bits, k_bits, v_bits;
    const auto q_r = round(q, q_bits), k_r = round(k, k_bits), v_r = round(v, v_bits);
    DeviceBuffer<bf16> qb_d(qs.size), kb_d(ks.size), vb_d(vs.size), ob_d(B * H * Tq * D);
    qb_d.upload(q_bits);
    kb_d.upload(k_bits);
    vb_d.upload(v_bits);
    AttentionForwardParams<bf16, float> hp{};
    hp.q = qb_d.get(), hp.k = kb_d.get(), hp.v = vb_d.get(), hp.o = ob_d.get();
    hp.lse = lse_d.get();
    hp.key_lengths = fp.key_lengths;
    hp.q_stride_b = qs.b, hp.q_stride_h = qs.h, hp.q_stride_t = qs.t;
    hp.k_stride_b = ks.b, hp.k_stride_h = ks.h, hp.k_stride_t = ks.t;
    hp.v_stride_b = vs.b, hp.v_stride_h = vs.h, hp.v_stride_t = vs.t;
    hp.o_stride_t = D, hp.o_stride_h = Tq * D, hp.o_stride_b = H * Tq * D;
    hp.batch = B, hp.heads = H, hp.q_len = Tq, hp.k_len = Tk, hp.head_dim = D;
    hp.scale = scale;
    hp.causal = c.causal;
    if (cuda_ops::flash_attention_forward_bf16_supported(hp)) {
      const Reference rb = reference(c, q_r, qs, k_r, ks, v_r, vs, d_o, scale);
      // Every tiling of the forward into buffers of its own: the worst of o
      // and lse as a fraction of the tolerance.
      {
        DeviceBuffer<bf16> o2_d(B * H * Tq * D);
        DeviceBuffer<float> lse2_d(B * H * Tq);
        AttentionForwardParams<bf16, float> tp = hp;
        tp.o = o2_d.get(), tp.lse = lse2_d.get();
        for (int t = 0; t < cuda_ops::flash_attention_forward_bf16_tilings(); ++t) {
          const std::string tag = "b.f" + std::to_string(t);
          o2_d.poison(), lse2_d.poison();
          if (!check_call(tag.c_str(), cuda_ops::flash_attention_forward_bf16_tiling(tp, nullptr, t))) continue;
          std::vector<float> o_got;
          for (const bf16 x : o2_d.download(B * H * Tq * D)) o_got.push_back(nmt::ops::to_float(x));
          report(tag.c_str(), std::max(worst_error(o_got, rb.o, kBf16Atol, kBf16Rtol),
                                       worst_error(lse2_d.download(B * H * Tq), rb.lse)));
        }
      }
      ob_d.poison(), lse_d.poison();
      if (check_call("bf16 fwd", cuda_ops::flash_attention_forward_bf16(hp, nullptr))) {
        std::vector<float> o_got;
        for (const bf16 x : ob_d.download(B * H * Tq * D)) o_got.push_back(nmt::ops::to_float(x));
        report("b.o", worst_error(o_got, rb.o, kBf16Atol, kBf16Rtol));
        report("b.lse", worst_error(lse_d.download(B * H * Tq), rb.lse));
        // The tensor-core backward from this o and lse, with dO rounded to
        // bf16, against the reference of the rounded values; twice, and the
        // two runs must agree bit for bit (no atomics).
        std::vector<bf16> do_bits;
        const auto do_r = round(d_o, do_bits);
        const Reference rg = reference(c, q_r, qs, k_r, ks, v_r, vs, do_r, scale);
        DeviceBuffer<bf16> dob_d(B * H * Tq * D), dqb_d(B * H * Tq * D), dkb_d(B * H * Tk * D),
            dvb_d(B * H * Tk * D);
        dob_d.upload(do_bits);
        AttentionBackwardParams<bf16, float> hb{};
        hb.q = hp.q, hb.k = hp.k, hb.v = hp.v, hb.o = ob_d.get(), hb.lse = lse_d.get();
        hb.d_o = dob_d.get(), hb.dq = dqb_d.get(), hb.dk = dkb_d.get(), hb.dv = dvb_d.get();
        hb.key_lengths = fp.key_lengths;
        hb.q_stride_b = qs.b, hb.q_stride_h = qs.h, hb.q_stride_t = qs.t;
        hb.k_stride_b = ks.b, hb.k_stride_h = ks.h, hb.k_stride_t = ks.t;
        hb.v_stride_b = vs.b, hb.v_stride_h = vs.h, hb.v_stride_t = vs.t;
        hb.o_stride_t = hb.do_stride_t = hb.dq_stride_t = D;
        hb.o_stride_h = hb.do_stride_h = hb.dq_stride_h = Tq * D;
        hb.o_stride_b = hb.do_stride_b = hb.dq_stride_b = H * Tq * D;
        hb.dk_stride_t = hb.dv_stride_t = D;
        hb.dk_stride_h = hb.dv_stride_h = Tk * D;
        hb.dk_stride_b = hb.dv_stride_b = H * Tk * D;
        hb.batch = B, hb.heads = H, hb.q_len = Tq, hb.k_len = Tk, hb.head_dim = D;
        hb.scale = scale;
        hb.causal = c.causal;
        const auto widen = [](const std::vector<bf16>& bits) {
          std::vector<float> out;
          for (const bf16 x : bits) out.push_back(nmt::ops::to_float(x));
          return out;
        };
        if (cuda_ops::flash_attention_backward_bf16_supported(hb)) {
          dqb_d.poison(), dkb_d.poison(), dvb_d.poison(), delta_d.poison();
          // Deterministic mode (no dQ scratch), then run again for the bits.
          if (check_call("bf16 bwd", cuda_ops::flash_attention_backward_bf16(hb, delta_d.get(), nullptr, nullptr))) {
            const auto dq1 = dqb_d.download(B * H * Tq * D), dk1 = dkb_d.download(B * H * Tk * D),
                       dv1 = dvb_d.download(B * H * Tk * D);
            report("b.dq", worst_error(widen(dq1), rg.dq, kBf16GradAtol, kBf16GradRtol));
            report("b.dk", worst_error(widen(dk1), rg.dk, kBf16GradAtol, kBf16GradRtol));
            report("b.dv", worst_error(widen(dv1), rg.dv, kBf16GradAtol, kBf16GradRtol));
            dqb_d.poison(), dkb_d.poison(), dvb_d.poison();
            if (check_call("bf16 bwd again",
                           cuda_ops::flash_attention_backward_bf16(hb, delta_d.get(), nullptr, nullptr))) {
              const auto same = [](const std::vector<bf16>& a, const std::vector<bf16>& b) {
                return a.size() == b.size() &&
                       (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0);
              };
              const bool det = same(dq1, dqb_d.download(B * H * Tq * D)) &&
                               same(dk1, dkb_d.download(B * H * Tk * D)) &&
                               same(dv1, dvb_d.download(B * H * Tk * D));
              report("b.rerun", det ? 0.0 : 2.0);
            }
          }
          // The default mode: dQ added up with atomics in a float32 scratch
          // (poisoned: the backward must clear it itself).
          dqb_d.poison(), dkb_d.poison(), dvb_d.poison(), dq_accum_d.poison();
          if (check_call("bf16 bwd atomic",
                         cuda_ops::flash_attention_backward_bf16(hb, delta_d.get(), dq_accum_d.get(), nullptr))) {
            report("b.dq.atomic", worst_error(widen(dqb_d.download(B * H * Tq * D)), rg.dq, kBf16GradAtol, kBf16GradRtol));
            report("b.dk.atomic", worst_error(widen(dkb_d.download(B * H * Tk * D)), rg.dk, kBf16GradAtol, kBf16GradRtol));
            report("b.dv.atomic", worst_error(widen(dvb_d.download(B * H * Tk * D)), rg.dv, kBf16GradAtol, kBf16GradRtol));
          }
          // Every tiling of the dK/dV kernel, in both modes (the dQ kernel
          // of the deterministic mode is the same for all).
          for (int t = 0; t < cuda_ops::flash_attention_backward_bf16_tilings(); ++t) {
            const std::string tag = "b.t" + std::to_string(t);
            for (const bool atomic : {true, false}) {
              dqb_d.poison(), dkb_d.poison(), dvb_d.poison(), dq_accum_d.poison();
              if (!check_call((tag + (atomic ? " atomic" : " deterministic")).c_str(),
                              cuda_ops::flash_attention_backward_bf16_tiling(
                                  hb, delta_d.get(), atomic ? dq_accum_d.get() : nullptr, nullptr, t)))
                continue;
              // The worst of dq, dk, dv as a fraction of the tolerance.
              const double worst = std::max(
                  {worst_error(widen(dqb_d.download(B * H * Tq * D)), rg.dq, kBf16GradAtol, kBf16GradRtol),
                   worst_error(widen(dkb_d.download(B * H * Tk * D)), rg.dk, kBf16GradAtol, kBf16GradRtol),
                   worst_error(widen(dvb_d.download(B * H * Tk * D)), rg.dv, kBf16GradAtol, kBf16GradRtol)});
              report((tag + (atomic ? ".atomic" : "")).c_str(), worst);
            }
          }
        } else {
          detail += " b.bwd=n/a";
        }
      }
    } else {
      detail += " b=n/a";
    }
  }

  std::printf("[%s] %-34s B=%lld H=%lld Tq=%lld Tk=%lld D=%lld causal=%d |%s\n",
              ok ? "PASS" : "FAIL", c.name.c_str(), static_cast<long long>(B),
              static_cast<long long>(H), static_cast<long long>(Tq), static_cast<long long>(Tk),
              static_cast<long long>(D), c.causal ? 1 : 0, detail.c_str());
  std::fflush(stdout);
  return ok;
}

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  add({"T=1", 1, 1, 1, 1, 64, false, {}});
  add({"T=1 causal", 2, 1, 1, 1, 64, true, {}});
  add({"T=17 D=64", 2, 3, 17, 17, 64, false, {}});
  add({"T=17 D=64 causal", 2, 3, 17, 17, 64, true, {}});
  add({"T=17 D=64 key lengths", 2, 2, 17, 17, 64, false, {17, 5}});
  add({"cross Tq<Tk", 2, 2, 33, 70, 64, false, {70, 1}});
  add({"cross Tq<Tk causal", 1, 2, 20, 150, 64, true, {}});
  add({"cross Tq>Tk causal", 2, 2, 150, 33, 64, true, {33, 7}});
  add({"key length 0", 2, 2, 9, 9, 64, false, {0, 9}});
  add({"key length 0 causal", 2, 2, 9, 9, 64, true, {9, 0}});
  add({"multi-tile causal + lengths", 2, 2, 300, 300, 64, true, {300, 131}});
  add({"multi-tile non-causal", 1, 2, 257, 190, 64, false, {}});
  add({"long rows causal (16 key tiles)", 1, 1, 1024, 1024, 64, true, {}});
  add({"D=32", 2, 2, 129, 129, 32, true, {}});
  add({"D=80 generic", 1, 2, 130, 130, 80, true, {100}});
  add({"D=80 generic non-causal", 2, 1, 70, 95, 80, false, {95, 60}});
  add({"D=128", 2, 2, 200, 200, 128, true, {}});
  add({"D=128 non-causal lengths", 2, 1, 97, 161, 128, false, {3, 161}});
  add({"D=128 three key blocks of 128", 2, 2, 280, 300, 128, false, {300, 170}});
  add({"D=128 long causal", 1, 2, 600, 600, 128, true, {}});
  add({"D=192 generic", 1, 2, 70, 70, 192, true, {}});
  add({"D=256 generic", 1, 2, 70, 45, 256, false, {45}});
  add({"D=8 generic", 2, 2, 40, 40, 8, true, {}});
  add({"D=33 unaligned (scalar loads)", 2, 2, 75, 75, 33, true, {75, 40}});
  add({"[B,T,H,D] view causal", 2, 3, 150, 150, 64, true, {}, Layout::kBTHD});
  add({"[B,T,H,D] view cross", 2, 2, 40, 90, 64, false, {90, 17}, Layout::kBTHD});
  add({"pitch D+1 (scalar loads)", 2, 2, 100, 100, 64, true, {}, Layout::kContiguous, 1});
  add({"pitch D+4 view D=128", 1, 2, 90, 90, 128, false, {}, Layout::kBTHD, 4});
  return cases;
}

// ---------------------------------------------------------------------------
// Benchmark: B=8, H=8, T=4096, D=64 (the performance target shape).
// ---------------------------------------------------------------------------
template <typename Fn>
float time_ms(Fn&& fn, int reps) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  fn();  // warm-up
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaEventRecord(start));
  for (int r = 0; r < reps; ++r) fn();
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return ms / reps;
}

void run_benchmark() {
  const int64_t B = 8, H = 8, T = 4096, D = 64;
  const int64_t n = B * H * T * D;
  std::mt19937 rng(7);
  DeviceBuffer<float> q(n), k(n), v(n), o(n), d_o(n), dq(n), dk(n), dv(n), accum(n);
  DeviceBuffer<float> lse(B * H * T), delta(B * H * T);
  q.upload(random_vector(n, rng, 1.0f));
  k.upload(random_vector(n, rng, 1.0f));
  v.upload(random_vector(n, rng, 1.0f));
  d_o.upload(random_vector(n, rng, 1.0f));
  // Naive needs two [B, H, T, T] buffers (4 GiB each); skip it if they do not fit.
  float* probs = nullptr;
  float* dscratch = nullptr;
  const size_t big = static_cast<size_t>(B * H * T) * T * sizeof(float);
  const bool naive_fits =
      cudaMalloc(&probs, big) == cudaSuccess && cudaMalloc(&dscratch, big) == cudaSuccess;
  if (!naive_fits) cudaGetLastError();  // clear the allocation error

  for (const bool causal : {false, true}) {
    AttentionForwardParams<float> fp{};
    fp.q = q.get(), fp.k = k.get(), fp.v = v.get(), fp.o = o.get(), fp.lse = lse.get();
    fp.q_stride_b = fp.k_stride_b = fp.v_stride_b = H * T * D;
    fp.q_stride_h = fp.k_stride_h = fp.v_stride_h = T * D;
    fp.q_stride_t = fp.k_stride_t = fp.v_stride_t = D;
    fp.batch = B, fp.heads = H, fp.q_len = T, fp.k_len = T, fp.head_dim = D;
    fp.scale = 1.0f / std::sqrt(static_cast<float>(D));
    fp.causal = causal;
    AttentionBackwardParams<float> bp{};
    bp.q = fp.q, bp.k = fp.k, bp.v = fp.v, bp.o = o.get(), bp.lse = lse.get();
    bp.d_o = d_o.get(), bp.dq = dq.get(), bp.dk = dk.get(), bp.dv = dv.get();
    bp.q_stride_b = bp.k_stride_b = bp.v_stride_b = H * T * D;
    bp.q_stride_h = bp.k_stride_h = bp.v_stride_h = T * D;
    bp.q_stride_t = bp.k_stride_t = bp.v_stride_t = D;
    bp.batch = B, bp.heads = H, bp.q_len = T, bp.k_len = T, bp.head_dim = D;
    bp.scale = fp.scale;
    bp.causal = causal;

    // Matmul FLOPs: forward 2 GEMMs, backward 5 (halved by the causal mask).
    const double fwd_flops = 4.0 * B * H * T * T * D * (causal ? 0.5 : 1.0);
    const double bwd_flops = 2.5 * fwd_flops;
    const int reps = 5;
    const float flash_fwd = time_ms([&] { cuda_ops::flash_attention_forward(fp, nullptr); }, reps);
    const float flash_both = time_ms(
        [&] {
          cuda_ops::flash_attention_forward(fp, nullptr);
          cuda_ops::flash_attention_backward(bp, delta.get(), accum.get(), nullptr);
        },
        reps);
    std::printf(
        "bench causal=%d flash: fwd %.2f ms (%.1f TFLOP/s), fwd+bwd %.2f ms (%.1f TFLOP/s)\n",
        causal ? 1 : 0, flash_fwd, fwd_flops / flash_fwd * 1e-9, flash_both,
        (fwd_flops + bwd_flops) / flash_both * 1e-9);
    if (naive_fits) {
      fp.probs = probs;
      bp.probs = probs;
      const float naive_fwd = time_ms([&] { cuda_ops::naive_attention_forward(fp, nullptr); }, 2);
      const float naive_both = time_ms(
          [&] {
            cuda_ops::naive_attention_forward(fp, nullptr);
            cuda_ops::naive_attention_backward(bp, dscratch, nullptr);
          },
          2);
      std::printf(
          "bench causal=%d naive: fwd %.2f ms, fwd+bwd %.2f ms; flash speed-up fwd %.1fx, "
          "fwd+bwd %.1fx\n",
          causal ? 1 : 0, naive_fwd, naive_both, naive_fwd / flash_fwd, naive_both / flash_both);
    }
    CHECK_CUDA(cudaGetLastError());
  }
  cudaFree(probs);
  cudaFree(dscratch);
}

// ---------------------------------------------------------------------------
// --bench-tilings: the bf16 tensor-core forward with each of its tilings,
// then the backward with each dK/dV tiling, B = 8, H = 8, at the shapes
// bench_gpu.sh reports (T = 1024 and 4096, D = 64 and 128, causal and not,
// and the model's 64 x 512 cross shape), the backward in the mode the
// LibTorch glue picks (atomic dQ from kAtomicDqMinKeys keys). One line per
// shape and tiling: the forward's ms; the backward's ms after the default
// forward's, and their sum (medians of 7 timings of 10 runs each).
// ---------------------------------------------------------------------------
float median_ms(const std::function<void()>& fn, int reps) {
  std::vector<float> t;
  for (int r = 0; r < 7; ++r) t.push_back(time_ms(fn, reps));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void run_tiling_benchmark() {
  using nmt::ops::bf16;
  struct Shape {
    int64_t tq, tk, d;
    bool causal;
  };
  std::vector<Shape> shapes;
  for (const int64_t d : {64, 128})
    for (const int64_t t : {1024, 4096})
      for (const bool causal : {false, true}) shapes.push_back({t, t, d, causal});
  shapes.push_back({64, 512, 64, false});
  const int64_t B = 8, H = 8;
  std::mt19937 rng(11);
  for (const Shape& sh : shapes) {
    const int64_t nq = B * H * sh.tq * sh.d, nk = B * H * sh.tk * sh.d;
    const auto bits = [&](int64_t n) {
      std::vector<bf16> out;
      for (const float x : random_vector(n, rng, 1.0f)) out.push_back(nmt::ops::to_bf16(x));
      return out;
    };
    DeviceBuffer<bf16> q(nq), k(nk), v(nk), o(nq), d_o(nq), dq(nq), dk(nk), dv(nk);
    DeviceBuffer<float> lse(B * H * sh.tq), delta(B * H * sh.tq), accum(nq);
    q.upload(bits(nq)), k.upload(bits(nk)), v.upload(bits(nk)), d_o.upload(bits(nq));
    AttentionForwardParams<bf16, float> fp{};
    fp.q = q.get(), fp.k = k.get(), fp.v = v.get(), fp.o = o.get(), fp.lse = lse.get();
    fp.q_stride_t = sh.d, fp.q_stride_h = sh.tq * sh.d, fp.q_stride_b = H * sh.tq * sh.d;
    fp.k_stride_t = fp.v_stride_t = sh.d, fp.k_stride_h = fp.v_stride_h = sh.tk * sh.d;
    fp.k_stride_b = fp.v_stride_b = H * sh.tk * sh.d;
    fp.batch = B, fp.heads = H, fp.q_len = sh.tq, fp.k_len = sh.tk, fp.head_dim = sh.d;
    fp.scale = 1.0f / std::sqrt(static_cast<float>(sh.d));
    fp.causal = sh.causal;
    AttentionBackwardParams<bf16, float> bp{};
    bp.q = fp.q, bp.k = fp.k, bp.v = fp.v, bp.o = o.get(), bp.lse = lse.get();
    bp.d_o = d_o.get(), bp.dq = dq.get(), bp.dk = dk.get(), bp.dv = dv.get();
    bp.q_stride_b = bp.o_stride_b = bp.do_stride_b = bp.dq_stride_b = fp.q_stride_b;
    bp.q_stride_h = bp.o_stride_h = bp.do_stride_h = bp.dq_stride_h = fp.q_stride_h;
    bp.q_stride_t = bp.o_stride_t = bp.do_stride_t = bp.dq_stride_t = sh.d;
    bp.k_stride_b = bp.v_stride_b = bp.dk_stride_b = bp.dv_stride_b = fp.k_stride_b;
    bp.k_stride_h = bp.v_stride_h = bp.dk_stride_h = bp.dv_stride_h = fp.k_stride_h;
    bp.k_stride_t = bp.v_stride_t = bp.dk_stride_t = bp.dv_stride_t = sh.d;
    bp.batch = B, bp.heads = H, bp.q_len = sh.tq, bp.k_len = sh.tk, bp.head_dim = sh.d;
    bp.scale = fp.scale;
    bp.causal = sh.causal;
    const bool atomic = cuda_ops::bf16_backward_uses_atomic_dq(sh.tk, /*deterministic=*/false);
    const int reps = 10;
    for (int t = 0; t < cuda_ops::flash_attention_forward_bf16_tilings(); ++t) {
      if (cuda_ops::flash_attention_forward_bf16_tiling(fp, nullptr, t) != 0 ||
          cudaDeviceSynchronize() != cudaSuccess) {
        std::printf("forward tiling %d: failed: %s\n", t, cudaGetErrorString(cudaGetLastError()));
        continue;
      }
      const float ms = median_ms([&] { cuda_ops::flash_attention_forward_bf16_tiling(fp, nullptr, t); }, reps);
      std::printf("fwd-tilings Tq=%lld Tk=%lld D=%lld causal=%d tiling %d: fwd %.3f ms  [%s]\n",
                  static_cast<long long>(sh.tq), static_cast<long long>(sh.tk), static_cast<long long>(sh.d),
                  sh.causal ? 1 : 0, t, ms,
                  cuda_ops::flash_attention_forward_bf16_tiling_name(static_cast<int>(sh.d), t).c_str());
    }
    // The backward's inputs o and lse from the default forward.
    const float fwd = median_ms([&] { cuda_ops::flash_attention_forward_bf16(fp, nullptr); }, reps);
    for (int t = 0; t < cuda_ops::flash_attention_backward_bf16_tilings(); ++t) {
      const auto bwd_call = [&] {
        return cuda_ops::flash_attention_backward_bf16_tiling(bp, delta.get(), atomic ? accum.get() : nullptr,
                                                              nullptr, t);
      };
      if (bwd_call() != 0 || cudaDeviceSynchronize() != cudaSuccess) {
        std::printf("tiling %d: failed: %s\n", t, cudaGetErrorString(cudaGetLastError()));
        continue;
      }
      const float bwd = median_ms([&] { bwd_call(); }, reps);
      std::printf("tilings Tq=%lld Tk=%lld D=%lld causal=%d dq=%s tiling %d: fwd %.3f ms bwd %.3f ms fwd+bwd %.3f ms  [%s]\n",
                  static_cast<long long>(sh.tq), static_cast<long long>(sh.tk), static_cast<long long>(sh.d),
                  sh.causal ? 1 : 0, atomic ? "atomic" : "two-kernel", t, fwd, bwd, fwd + bwd,
                  cuda_ops::flash_attention_backward_bf16_tiling_name(static_cast<int>(sh.d), t).c_str());
      std::fflush(stdout);
    }
    CHECK_CUDA(cudaGetLastError());
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool bench = false, bench_tilings = false, cases_too = true;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--bench") == 0) bench = true;
    else if (std::strcmp(argv[a], "--bench-tilings") == 0) bench_tilings = true;
    else if (std::strcmp(argv[a], "--no-cases") == 0) cases_too = false;
    else {
      std::fprintf(stderr, "flash_standalone_test: unknown argument %s (--bench, --bench-tilings, --no-cases)\n",
                   argv[a]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return kSkipExitCode;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

  int passed = 0;
  int failed = 0;
  const std::vector<Case> cases = cases_too ? make_cases() : std::vector<Case>{};
  for (size_t n = 0; n < cases.size(); ++n)
    (run_case(cases[n], static_cast<int>(n)) ? passed : failed)++;

  if (bench) run_benchmark();
  if (bench_tilings) run_tiling_benchmark();

  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
