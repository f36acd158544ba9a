// An allocator for large read-mostly arrays (packed weights) that asks the
// kernel for 2 MB pages (transparent huge pages, madvise mode). A decoding
// step streams every weight once: in 4 KB pages that is thousands of pages a
// step, more than the TLB holds. Arrays under 1 MB (a 2 MB page would be
// mostly waste), or where the kernel declines, stay in ordinary pages; the
// contents are the same either way.
#pragma once

#include <cstddef>
#include <new>

namespace nmt {

// Memory of at least `bytes`, 2 MB aligned and advised as huge when large;
// release with huge_page_free(p, bytes).
void* huge_page_alloc(size_t bytes);
void huge_page_free(void* p, size_t bytes) noexcept;

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(huge_page_alloc(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { huge_page_free(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const noexcept { return false; }
};

}  // namespace nmt
