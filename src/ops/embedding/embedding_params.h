// The fused token embedding's parameters (cpu/embedding_cpu.h,
// cuda/embedding_kernel.h): one struct per pass for every device.
#pragma once

#include <cstdint>

#include "ops/random/philox.h"

namespace nmt::ops {

template <typename T>
struct EmbeddingParams {
  const int64_t* ids;    // ids: [B, T]
  const T* table;        // table: [V, C]
  const T* positions;    // positions: [P, C], row offset + t is added at position t
  T* out;                // out: [B, T, C] (written)
  int64_t batch, length, channels, vocab;
  int64_t position_offset;
  T scale;
  philox::DropoutStream dropout;
};

template <typename T>
struct EmbeddingBackwardParams {
  const int64_t* ids;  // ids: [B, T]
  const T* dout;       // dout: [B, T, C]
  T* dtable;           // dtable: [V, C] (written: zeros where no token points; or added to)
  int64_t batch, length, channels, vocab;
  int64_t padding_id;  // gets no gradient
  T scale;
  philox::DropoutStream dropout;
  bool accumulate = false;  // add into dtable as it is (the CPU kernel; the GPU's always adds)
};

}  // namespace nmt::ops
