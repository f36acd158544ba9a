// The flash CPU kernels on a training batch's own sentences: a prepared
// corpus's source and target lengths (its index.bin), sentences drawn at
// random until the source side holds --rows tokens, packed one after
// another as training packs them, and the model's three attention calls on
// them (encoder self-attention, causal decoder self-attention,
// cross-attention), forward and backward, float32, on projections laid out
// as the model's ([N, 3C] for self-attention, [N, C] and [N, 2C] for
// cross-attention). Prints the median of --repeats timed runs per call and
// the useful GFLOP/s (the sentences' own query-key pairs, causal halves
// counted as such). No LibTorch: the kernels and the index reader only.
//
// Usage: attention_packed --corpus DIR [--rows N] [--heads H] [--head-dim D]
//                         [--repeats R] [--threads N] [--seed S]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/shards.h"
#include "ops/attention/cpu/attention_cpu.h"

namespace {

using nmt::ops::AttentionBackwardParams;
using nmt::ops::AttentionForwardParams;

struct Args {
  std::string corpus;
  int64_t rows = 2400, heads = 4, head_dim = 64, repeats = 20, threads = 0, seed = 1;
};

constexpr const char* kUsage =
    "usage: attention_packed --corpus DIR [--rows N] [--heads H] [--head-dim D] [--repeats R] [--threads N] "
    "[--seed S]\n";

[[noreturn]] void usage_error(const std::string& what, bool show_usage = true) {
  std::fprintf(stderr, "attention_packed: %s\n", what.c_str());
  if (show_usage) std::fputs(kUsage, stderr);
  std::exit(2);
}

int64_t positive(const std::string& flag, const char* text, int64_t max) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1 || v > max)
    usage_error(flag + ": '" + text + "' is not an integer in 1.." + std::to_string(max));
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) usage_error(flag + ": needs a value");
    const char* value = argv[++i];
    if (flag == "--corpus") a.corpus = value;
    else if (flag == "--rows") a.rows = positive(flag, value, 1 << 22);
    else if (flag == "--heads") a.heads = positive(flag, value, 256);
    else if (flag == "--head-dim") a.head_dim = positive(flag, value, 1024);
    else if (flag == "--repeats") a.repeats = positive(flag, value, 100000);
    else if (flag == "--threads") a.threads = positive(flag, value, 1024);
    else if (flag == "--seed") a.seed = positive(flag, value, int64_t{1} << 62);
    else usage_error("unknown option " + flag);
  }
  if (a.corpus.empty()) usage_error("--corpus is required (a folder `nmt prepare` wrote)");
  return a;
}

// The source and target lengths of a prepared corpus.
void read_lengths(const std::string& dir, std::vector<int64_t>& src, std::vector<int64_t>& tgt) {
  const std::string path = dir + "/" + nmt::data::kCorpusIndex;
  std::ifstream in(path, std::ios::binary);
  if (!in) usage_error(path + ": cannot open (is --corpus a folder `nmt prepare` wrote?)", false);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nmt::data::IndexView index;
  try {
    index = nmt::data::parse_index(bytes.data(), bytes.size(), path);
  } catch (const std::exception& e) {
    usage_error(e.what(), false);
  }
  if (index.pairs == 0) usage_error(path + ": the corpus has no pairs", false);
  src.assign(index.src_len, index.src_len + index.pairs);
  tgt.assign(index.tgt_len, index.tgt_len + index.pairs);
}

std::vector<int64_t> starts_of(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> starts{0};
  for (const int64_t n : lengths) starts.push_back(starts.back() + n);
  return starts;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One of the model's attention calls on packed sentences.
struct Call {
  const char* name;
  bool cross, causal;
  std::vector<int64_t> q_len, k_len;  // per sentence
};

struct Timing {
  double forward_ms, backward_ms, pairs;
};

Timing run_call(const Call& c, const Args& a, std::mt19937_64& rng) {
  const int64_t H = a.heads, D = a.head_dim, C = H * D, B = static_cast<int64_t>(c.q_len.size());
  const std::vector<int64_t> qs = starts_of(c.q_len), ks = starts_of(c.k_len);
  const int64_t Nq = qs.back(), Nk = ks.back();
  const int64_t Tq = *std::max_element(c.q_len.begin(), c.q_len.end());
  const int64_t Tk = *std::max_element(c.k_len.begin(), c.k_len.end());
  // Self-attention reads q, k, v from one [N, 3C] tensor; cross-attention q
  // from [Nq, C] and k, v from [Nk, 2C], as the model's fused projections.
  const int64_t q_width = c.cross ? C : 3 * C, kv_width = c.cross ? 2 * C : 3 * C;
  std::normal_distribution<float> normal;
  std::vector<float> q_src(Nq * q_width), kv_src(c.cross ? Nk * kv_width : 0), o(Nq * C), d_o(Nq * C);
  std::vector<float> dq_src(q_src.size()), dkv_src(kv_src.size()), lse(B * H * Tq);
  for (float& x : q_src) x = normal(rng);
  for (float& x : kv_src) x = normal(rng);
  for (float& x : d_o) x = normal(rng);
  const float* kv = c.cross ? kv_src.data() : q_src.data() + C;  // k at column 0 (cross) or C (self)
  float* dkv = c.cross ? dkv_src.data() : dq_src.data() + C;

  AttentionForwardParams<float> f{};
  f.q = q_src.data(), f.k = kv, f.v = kv + C, f.o = o.data(), f.lse = lse.data();
  f.q_stride_h = D, f.q_stride_t = q_width;
  f.k_stride_h = f.v_stride_h = D, f.k_stride_t = f.v_stride_t = kv_width;
  f.o_stride_h = D, f.o_stride_t = C;
  f.batch = B, f.heads = H, f.q_len = Tq, f.k_len = Tk, f.head_dim = D;
  f.scale = 1.0f / std::sqrt(static_cast<float>(D)), f.causal = c.causal;
  f.q_starts = qs.data(), f.kv_starts = ks.data();
  AttentionBackwardParams<float> b{};
  b.q = f.q, b.k = f.k, b.v = f.v, b.o = f.o, b.lse = f.lse, b.d_o = d_o.data();
  b.dq = dq_src.data(), b.dk = dkv, b.dv = dkv + C;
  b.q_stride_h = b.k_stride_h = b.v_stride_h = b.o_stride_h = b.do_stride_h = D;
  b.dq_stride_h = b.dk_stride_h = b.dv_stride_h = D;
  b.q_stride_t = b.dq_stride_t = q_width;
  b.k_stride_t = b.v_stride_t = b.dk_stride_t = b.dv_stride_t = kv_width;
  b.o_stride_t = b.do_stride_t = C;
  b.batch = B, b.heads = H, b.q_len = Tq, b.k_len = Tk, b.head_dim = D;
  b.scale = f.scale, b.causal = c.causal, b.q_starts = qs.data(), b.kv_starts = ks.data();

  std::vector<double> forward, backward;
  for (int64_t r = 0; r < a.repeats + 3; ++r) {  // three warm-up runs
    const double t0 = now_ms();
    nmt::ops::cpu::flash_attention_forward(f);
    const double t1 = now_ms();
    nmt::ops::cpu::flash_attention_backward(b);
    const double t2 = now_ms();
    if (r >= 3) forward.push_back(t1 - t0), backward.push_back(t2 - t1);
  }
  double pairs = 0;  // query-key pairs a head computes, over the sentences
  for (int64_t s = 0; s < B; ++s) {
    const double n = static_cast<double>(c.q_len[s]), m = static_cast<double>(c.k_len[s]);
    pairs += c.causal ? n * (n + 1) / 2 : n * m;
  }
  return {median(forward), median(backward), pairs * static_cast<double>(H)};
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::vector<int64_t> src_len, tgt_len;
  read_lengths(a.corpus, src_len, tgt_len);
  if (a.threads > 0) omp_set_num_threads(static_cast<int>(a.threads));

  // Sentences drawn at random until the source side holds --rows tokens;
  // the decoder reads <start> y1..yn, one more than the target's tokens.
  std::mt19937_64 rng(static_cast<uint64_t>(a.seed));
  std::vector<int64_t> src, dec;
  int64_t rows = 0;
  while (rows < a.rows) {
    const size_t i = static_cast<size_t>(rng() % src_len.size());
    src.push_back(src_len[i]), dec.push_back(tgt_len[i] + 1), rows += src_len[i];
  }
  const std::vector<Call> calls = {{"encoder self", false, false, src, src},
                                   {"decoder self (causal)", false, true, dec, dec},
                                   {"cross", true, false, dec, src}};
  std::printf("%zu sentences: %ld source rows, %ld decoder rows; H = %ld, D = %ld, %d threads, float32, "
              "medians of %ld runs\n",
              src.size(), static_cast<long>(rows), static_cast<long>(starts_of(dec).back()),
              static_cast<long>(a.heads), static_cast<long>(a.head_dim), omp_get_max_threads(),
              static_cast<long>(a.repeats));
  std::printf("%-22s %12s %12s %14s %14s\n", "call", "forward ms", "backward ms", "fwd GFLOP/s", "bwd GFLOP/s");
  double total_f = 0, total_b = 0;
  for (const Call& c : calls) {
    const Timing t = run_call(c, a, rng);
    // Useful work: QK^T and PV forward (4 D flops a pair), five products backward (10 D).
    const double flops = t.pairs * static_cast<double>(a.head_dim);
    std::printf("%-22s %12.3f %12.3f %14.1f %14.1f\n", c.name, t.forward_ms, t.backward_ms,
                4 * flops / t.forward_ms / 1e6, 10 * flops / t.backward_ms / 1e6);
    total_f += t.forward_ms, total_b += t.backward_ms;
  }
  std::printf("%-22s %12.3f %12.3f\n", "all three", total_f, total_b);
  return 0;
}
