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

  bool active() const { return p > 0; }
  philox::DropoutStream stream() const;
};

// The multipliers (0 or 1/(1-p)) of a [B, T, C] tensor at these coordinates,
// computed with ATen integer ops on `options`' device: an implementation
// independent of the CPU kernels (their tests compare the two) that also
// serves devices without fused kernels. Ones when p = 0.
at::Tensor dropout_multipliers(const Dropout& d, int64_t batch, int64_t length, int64_t channels,
                               const at::TensorOptions& options);

}  // namespace nmt::ops
