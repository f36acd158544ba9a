#include "util/huge_page_allocator.h"

#include <sys/mman.h>

#include <cstdlib>

namespace nmt {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kWorthIt = size_t{1} << 20;  // below this, ordinary pages

size_t rounded(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
}  // namespace

void* huge_page_alloc(size_t bytes) {
  if (bytes < kWorthIt) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void* p = std::aligned_alloc(kHugePage, rounded(bytes));
  if (p == nullptr) throw std::bad_alloc();
  // Before the first touch, so that the pages are faulted in huge. Advice
  // only: where THP is off, ordinary pages.
  ::madvise(p, rounded(bytes), MADV_HUGEPAGE);
  return p;
}

void huge_page_free(void* p, size_t) noexcept { std::free(p); }

}  // namespace nmt
