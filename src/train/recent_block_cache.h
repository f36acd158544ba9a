// A CPU allocator for training that hands a tensor the block of its size
// class freed last (a stack per class), so that a step's short-lived
// tensors land in memory the caches still hold.
//
// Why: a training step frees and allocates tensors of the same few sizes
// over and over (a layer's activations, gradients and products), and
// glibc's malloc hands out the free chunk that was freed first: memory
// that has long left the caches. A product that writes its output there
// pays for reading every line in before writing it: a bf16 product of
// configs/real.yaml's feed-forward shape (2176x256 . 256x1024) on a Xeon
// with AMX ran at 1,540 GFLOP/s into a recently used output and 790 into
// outputs cycled through 176 MB.
//
// Blocks from 256 KB up are rounded up to 8 classes a power of two (at
// most 12.5% more; with 16, 64% of them found a block freed before in the
// first 30 steps of configs/real.yaml, with 8, 81%) and kept when freed,
// up to as many bytes as were ever in use at once (so the process holds
// at most about twice its peak: configs/real.yaml's largest resident size
// went from 634 to 1,023 MB); smaller ones are malloc's, whose small bins
// are last-in first-out already. A request whose class holds no block
// takes the last freed of the next two classes up, if any.
#pragma once

#include <cstdint>

namespace nmt {

// Makes the cache LibTorch's CPU allocator (once; later calls do nothing).
// Tensors allocated before keep their own deleter.
void use_recent_block_cache();

// What the cache has done (for tests and the training log).
struct RecentBlockCacheStats {
  int64_t reused = 0;       // allocations served from the cache
  int64_t fresh = 0;        // allocations from 256 KB up that went to malloc
  int64_t cached_bytes = 0;  // bytes held in the cache now
  int64_t peak_bytes = 0;    // the most bytes of cached-size blocks in use at once
};
RecentBlockCacheStats recent_block_cache_stats();

// The class a request of `bytes` is rounded up to (bytes itself below 256 KB).
int64_t recent_block_class(int64_t bytes);

}  // namespace nmt
