// The fused bias + ReLU + dropout's parameters (cpu/bias_relu_dropout_cpu.h,
// cuda/bias_relu_dropout_kernel.h): one struct per pass for every device.
#pragma once

#include <cstdint>

#include "ops/bf16.h"
#include "ops/random/philox.h"

namespace nmt::ops {

template <typename T, typename U>
struct BiasReluDropoutParams {
  const U* h;         // h: [N, F]
  const T* bias;      // bias: [F]
  U* out;             // out: [N, F] (written)
  int64_t rows, channels, positions;  // N, F; row r is (r / positions, r % positions)
  philox::DropoutStream dropout;
};

template <typename T, typename U>
struct BiasReluDropoutBackwardParams {
  const U* out;   // out: [N, F] from the forward
  const U* dout;  // dout: [N, F]
  U* dh;          // dh: [N, F] (written)
  T* dbias;       // dbias: [F] (written)
  int64_t rows, channels;
  float p;        // dropout probability of the forward
};

}  // namespace nmt::ops
