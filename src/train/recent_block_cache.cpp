#include "train/recent_block_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace nmt {

namespace {

constexpr int64_t kSmallest = int64_t{256} << 10;  // below: malloc's own bins
constexpr int64_t kHeader = 64;                    // the class in front of the data, which stays 64-byte aligned
constexpr int kClassesPerOctave = 8;
// A request whose class has no block freed takes one of the next classes up
// (at most this many: a block up to two class steps, a quarter of the power
// of two below it, larger than the request's own class):
// a batch's tensors change size with its token count, and float32 runs of
// configs/real.yaml found a block of their own class for only 58% of them.
constexpr int kLargerClasses = 2;

struct Cache {
  std::mutex mutex;
  std::unordered_map<int64_t, std::vector<void*>> free;  // class -> blocks, freed last at the back
  int64_t in_use = 0, peak = 0, cached = 0, reused = 0, fresh = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may be freed during exit
  return *c;
}

// data: what the allocator handed out; its class sits kHeader bytes before.
void release(void* data) {
  if (data == nullptr) return;
  void* base = static_cast<char*>(data) - kHeader;
  const int64_t cls = *static_cast<int64_t*>(base);
  if (cls >= kSmallest) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.in_use -= cls;
    if (c.cached + cls <= c.peak) {
      c.free[cls].push_back(base);
      c.cached += cls;
      return;
    }
  }
  std::free(base);
}

struct RecentBlockAllocator final : c10::Allocator {
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override { return take(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
#else
  c10::DataPtr allocate(size_t n) const override { return take(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  static c10::DataPtr take(size_t n) {
    int64_t cls = recent_block_class(static_cast<int64_t>(n));
    void* base = nullptr;
    if (cls >= kSmallest) {
      Cache& c = cache();
      std::lock_guard<std::mutex> lock(c.mutex);
      int64_t take_cls = cls;
      for (int up = 0; up <= kLargerClasses; ++up) {
        auto it = c.free.find(take_cls);
        if (it != c.free.end() && !it->second.empty()) {
          base = it->second.back();
          it->second.pop_back();
          break;
        }
        take_cls = recent_block_class(take_cls + 1);
      }
      if (base != nullptr) {
        cls = take_cls;  // the block's own class: it goes back to that stack
        c.cached -= cls;
        ++c.reused;
      } else {
        ++c.fresh;
      }
      c.in_use += cls;
      c.peak = std::max(c.peak, c.in_use);
    }
    if (base == nullptr && ::posix_memalign(&base, kHeader, static_cast<size_t>(cls + kHeader)) != 0) {
      if (cls >= kSmallest) {
        std::lock_guard<std::mutex> lock(cache().mutex);
        cache().in_use -= cls;
      }
      throw std::bad_alloc();
    }
    *static_cast<int64_t*>(base) = cls;
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
};

}  // namespace

int64_t recent_block_class(int64_t bytes) {
  if (bytes < kSmallest) return bytes;
  int64_t octave = 1;
  while (octave * 2 <= bytes) octave *= 2;
  const int64_t step = octave / kClassesPerOctave;
  return (bytes + step - 1) / step * step;
}

void use_recent_block_cache() {
  static const bool installed = [] {
    c10::SetCPUAllocator(new RecentBlockAllocator, /*priority=*/1);
    return true;
  }();
  (void)installed;
}

RecentBlockCacheStats recent_block_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return {c.reused, c.fresh, c.cached, c.peak};
}

}  // namespace nmt
