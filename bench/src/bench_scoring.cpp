// Scoring speed: corpus BLEU, chrF and exact match over synthetic corpora of
// 1,000 and 10,000 lines. Prints the median of 7 runs and lines/s; asserts
// nothing about time (validation runs these every evaluation, so a slow
// scorer shows up here, not as a flaky unit test).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "eval/bleu.h"

namespace {

double median_ms(const std::function<void()>& f) {
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  std::printf("%-12s %8s %12s %14s\n", "scorer", "lines", "median_ms", "lines_per_s");
  for (const int n : {1000, 10000}) {
    std::vector<std::string> hyps, refs;
    for (int i = 0; i < n; ++i) {
      refs.push_back("The quick brown fox, number " + std::to_string(i) +
                     ", jumps over the lazy dog's 3.5 kennels (again). 敏捷的狐狸");
      hyps.push_back("A quick brown fox number " + std::to_string(i * 7) +
                     " jumped over the lazy dog's kennels again! 狐狸");
    }
    double bleu = 0, chrf = 0, exact = 1;
    const std::pair<const char*, std::function<void()>> scorers[] = {
        {"bleu", [&] { bleu = nmt::eval::corpus_bleu(hyps, refs).bleu; }},
        {"chrf", [&] { chrf = nmt::eval::chrf(hyps, refs); }},
        {"exact", [&] { exact = nmt::eval::exact_match(hyps, refs); }},
    };
    for (const auto& [name, f] : scorers) {
      const double ms = median_ms(f);
      std::printf("%-12s %8d %12.2f %14.0f\n", name, n, ms, n / (ms / 1000.0));
    }
    // The figures are only worth printing for a scorer that scored.
    if (!(bleu > 0 && bleu < 100 && chrf > 0 && chrf < 100 && exact == 0)) {
      std::fprintf(stderr, "bench_scoring: unexpected scores bleu %g chrf %g exact %g\n", bleu, chrf, exact);
      return 1;
    }
  }
  return 0;
}
