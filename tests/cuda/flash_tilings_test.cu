// The tiling lists of the bf16 kernels, on the CPU (no GPU needed): the
// run-time index chooses the tiling the list holds there (flash::with_tiling),
// every tiling of each op has a name of its own, exactly one is the default,
// and an index outside the list chooses none.
#include <cstdio>
#include <set>
#include <string>
#include <tuple>

#include "ops/attention/cuda/attention_cuda.h"
#include "ops/attention/cuda/flash_kernel_traits.h"

namespace {

int g_failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++g_failures;
  }
}

template <int N>
struct Marker {
  static constexpr int kValue = N;
};

void check_with_tiling() {
  using List = std::tuple<Marker<10>, Marker<11>, Marker<12>>;
  for (int index = -1; index <= 3; ++index) {
    int seen = -1, calls = 0;
    const bool found = nmt::ops::cuda::flash::with_tiling<List>(index, [&](auto tag) {
      seen = decltype(tag)::type::kValue;
      ++calls;
    });
    const bool in_range = index >= 0 && index < 3;
    expect(found == in_range, "with_tiling(" + std::to_string(index) + ") says whether the index is in range");
    expect(calls == (in_range ? 1 : 0), "with_tiling(" + std::to_string(index) + ") calls f once or never");
    if (in_range) expect(seen == 10 + index, "with_tiling(" + std::to_string(index) + ") picks that entry");
  }
}

template <class NameOf>
void check_names(const char* op, int count, NameOf name_of) {
  expect(count >= 1, std::string(op) + ": at least one tiling");
  for (const int head_dim : {64, 128}) {
    std::set<std::string> names;
    int defaults = 0;
    for (int t = 0; t < count; ++t) {
      const std::string name = name_of(head_dim, t);
      std::printf("%s D=%d tiling %d: %s\n", op, head_dim, t, name.c_str());
      expect(!name.empty(), std::string(op) + ": tiling " + std::to_string(t) + " has a name");
      names.insert(name);
      if (name.find("(default)") != std::string::npos) ++defaults;
    }
    expect(static_cast<int>(names.size()) == count, std::string(op) + ": the names differ");
    expect(defaults == 1, std::string(op) + ": exactly one default at D = " + std::to_string(head_dim));
    expect(name_of(head_dim, count).empty() && name_of(head_dim, -1).empty(),
           std::string(op) + ": no tiling outside the list");
  }
}

}  // namespace

int main() {
  namespace cuda_ops = nmt::ops::cuda;
  check_with_tiling();
  check_names("forward", cuda_ops::flash_attention_forward_bf16_tilings(),
              cuda_ops::flash_attention_forward_bf16_tiling_name);
  check_names("backward", cuda_ops::flash_attention_backward_bf16_tilings(),
              cuda_ops::flash_attention_backward_bf16_tiling_name);
  if (g_failures != 0) {
    std::printf("%d FAILED\n", g_failures);
    return 1;
  }
  std::printf("flash tilings: all checks passed\n");
  return 0;
}
