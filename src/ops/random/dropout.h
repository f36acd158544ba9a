// Dropout as the model uses it: a probability and the coordinates that make
// its masks reproducible (see philox.h). LibTorch-facing.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "ops/random/philox.h"

namespace nmt::ops {

struct Dropout {
  double p = 0;           // 0 (or eval mode): no dropout
  uint64_t seed = 0;      // the run's seed
  int64_t step = 0;       // optimizer step
  int64_t site = 0;       // which dropout in the model
  int64_t first_row = 0;  // global batch row of row 0
  // Sentences packed one after another instead of padded (training's encoder
  // on the CPU): [B + 1] int64 CPU, each sentence's first row; their masks
  // are those of the padded rows (DropoutStream::row_starts). Undefined: [B, T, C].
  at::Tensor row_starts;

  bool active() const { return p > 0; }
  philox::DropoutStream stream() const;
};

// The multipliers (0 or 1/(1-p)) of a [B, T, C] tensor at these coordinates,
// computed with ATen integer ops on `options`' device: an implementation
// independent of the CPU kernels (their tests compare the two) that also
// serves devices without fused kernels, except float32 and bf16 on a GPU,
// which get one kernel (dropout_multipliers_cuda). Ones when p = 0.
at::Tensor dropout_multipliers(const Dropout& d, int64_t batch, int64_t length, int64_t channels,
                               const at::TensorOptions& options);

#ifdef NMT_WITH_CUDA
// The same multipliers by one CUDA kernel (cuda/dropout_kernel.cu), for
// float32 and bf16 on a GPU; dropout_multipliers calls it there. The ATen
// version above is a few dozen integer ops per call, which made dropout the
// largest cost of a GPU training step (about 100 of 193 ms on an H100).
at::Tensor dropout_multipliers_cuda(const Dropout& d, int64_t batch, int64_t length, int64_t channels,
                                    const at::TensorOptions& options);
#endif

}  // namespace nmt::ops
