// See peak_cpu.h. The accumulators start from the caller's values, which
// differ, and end in the caller's memory: a compiler may neither merge the
// chains nor drop the loop (the first version of this loop, with equal
// starting values, was compiled into one chain and reported 12x the peak).
#include "ops/linear/cpu/peak_cpu.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

#include <chrono>

#include "ops/bf16.h"
#include "ops/cpu_parallel.h"
#include "ops/cpu_simd.h"
#include "util/cpu_features.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

namespace {

// The kernels' own vectors (ops/cpu_simd.h): a · m + c is one fused
// multiply-add where the instruction set has one (as in the products'
// micro-kernels), a multiply and an add in the generic copy.
using Reg = detail::Vec<float>;
constexpr int64_t kLanes = detail::kLanes<float>;
using detail::vec_loadu;
using detail::vec_storeu;

// The chains as named registers: an array of vectors indexed in a loop is
// kept in registers only when the compiler unrolls it all, which it does not
// promise.
template <typename Step>
void run_chains(int64_t rounds, float* acc, Step step) {
  static_assert(kPeakChains == 12, "the chains below are spelled out");
  Reg a0 = vec_loadu(acc + 0 * kLanes), a1 = vec_loadu(acc + 1 * kLanes), a2 = vec_loadu(acc + 2 * kLanes);
  Reg a3 = vec_loadu(acc + 3 * kLanes), a4 = vec_loadu(acc + 4 * kLanes), a5 = vec_loadu(acc + 5 * kLanes);
  Reg a6 = vec_loadu(acc + 6 * kLanes), a7 = vec_loadu(acc + 7 * kLanes), a8 = vec_loadu(acc + 8 * kLanes);
  Reg a9 = vec_loadu(acc + 9 * kLanes), a10 = vec_loadu(acc + 10 * kLanes), a11 = vec_loadu(acc + 11 * kLanes);
  for (int64_t r = 0; r < rounds; ++r) {
    a0 = step(a0), a1 = step(a1), a2 = step(a2), a3 = step(a3), a4 = step(a4), a5 = step(a5);
    a6 = step(a6), a7 = step(a7), a8 = step(a8), a9 = step(a9), a10 = step(a10), a11 = step(a11);
  }
  vec_storeu(acc + 0 * kLanes, a0), vec_storeu(acc + 1 * kLanes, a1), vec_storeu(acc + 2 * kLanes, a2);
  vec_storeu(acc + 3 * kLanes, a3), vec_storeu(acc + 4 * kLanes, a4), vec_storeu(acc + 5 * kLanes, a5);
  vec_storeu(acc + 6 * kLanes, a6), vec_storeu(acc + 7 * kLanes, a7), vec_storeu(acc + 8 * kLanes, a8);
  vec_storeu(acc + 9 * kLanes, a9), vec_storeu(acc + 10 * kLanes, a10), vec_storeu(acc + 11 * kLanes, a11);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int64_t peak_lanes() { return kLanes; }

double fma_chains(int64_t rounds, float mul, float add, float* acc) {
  const Reg m = detail::vec_set1(mul), c = detail::vec_set1(add);
  run_chains(rounds, acc, [&](Reg a) { return a * m + c; });
  return static_cast<double>(rounds) * kPeakChains * kLanes * 2;
}

#if defined(__AVX512BF16__)
bool has_bf16_dot() { return cpu_features().avx512_bf16; }

double bf16_dot_chains(int64_t rounds, float x, float* acc) {
  if (!has_bf16_dot()) return 0;
  // Each 32-bit lane holds a pair of bf16: (x, 0) and (1, 1).
  const uint32_t pair_x = to_bf16(x).bits, pair_one = 0x3f803f80u;
  const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair_x));
  const __m512bh b = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair_one));
  run_chains(rounds, acc, [&](Reg v) { return (Reg)_mm512_dpbf16_ps((__m512)v, a, b); });
  return static_cast<double>(rounds) * kPeakChains * kLanes * 4;  // two products, two adds a lane
}
#else
bool has_bf16_dot() { return false; }
double bf16_dot_chains(int64_t, float, float*) { return 0; }
#endif

double arithmetic_peak_gflops(bool bf16, int samples) {
  if (bf16 && !has_bf16_dot()) return 0;
  const auto run = [&](int64_t rounds, float* acc) {
    return bf16 ? bf16_dot_chains(rounds, 0x1p-20f, acc) : fma_chains(rounds, 1.0f, 0x1p-20f, acc);
  };
  const auto fill = [](float* acc) {
    for (int64_t i = 0; i < kPeakChains * kLanes; ++i) acc[i] = 1.0f + static_cast<float>(i) * 0x1p-10f;
  };
  // Rounds for about 20 ms on one thread, from a run of 1 ms or more.
  int64_t rounds = 1 << 12;
  for (;;) {
    alignas(64) float probe[kPeakChains * kLanes];
    fill(probe);
    const auto t0 = std::chrono::steady_clock::now();
    run(rounds, probe);
    const double s = seconds_since(t0);
    if (s >= 1e-3) {
      rounds = static_cast<int64_t>(static_cast<double>(rounds) * 0.02 / s) + 1;
      break;
    }
    rounds *= 4;
  }
  // (fixed arrays and a hand-written sort: a std::vector or std::sort would
  // leave template copies every instruction set's objects define, which
  // tests/check_kernel_isa.sh forbids)
  constexpr int kMaxSamples = 15;
  double rates[kMaxSamples];
  const int n = samples < 1 ? 1 : samples > kMaxSamples ? kMaxSamples : samples;
  for (int sample = 0; sample < n; ++sample) {
    double flops = 0;
    const auto t0 = std::chrono::steady_clock::now();
    detail::in_team([&] {
      alignas(64) float acc[kPeakChains * kLanes];
      fill(acc);
      const double done = run(rounds, acc);
      float sum = 0;
      for (const float v : acc) sum += v;
      volatile float sink = sum;  // the chains' values are used
      (void)sink;
#pragma omp atomic
      flops += done;
    });
    double rate = flops / seconds_since(t0) / 1e9;
    int i = sample;
    for (; i > 0 && rates[i - 1] > rate; --i) rates[i] = rates[i - 1];
    rates[i] = rate;
  }
  return rates[n / 2];
}

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
