// The steps the fused CPU routines (model/encoder_cpu.h and
// model/decoder_step_cpu.h) share, over raw pointers: the residual add with
// the LayerNorm after it, and a call of the attention kernel the backend
// names. No LibTorch here.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/attention/attention_params.h"
#include "ops/attention/cpu/attention_cpu.h"
#include "ops/layer_norm/cpu/add_layer_norm_cpu.h"

namespace nmt::fused {

// A residual add as the model makes it. Pre-norm: x: [rows, C] += y (when y
// is given, in place: each element of x is read before its sum is written),
// then h: [rows, C] = LayerNorm(x) with weight g and bias b. Post-norm:
// x = h = LayerNorm(x + y), and without y (the embeddings entering the first
// layer) h = x. mean, rstd: [rows] scratch.
inline void residual(float* x, const float* y, const float* g, const float* b, float* h, float* mean, float* rstd,
                     int64_t rows, int64_t channels, double eps, bool post_norm) {
  if (post_norm && y == nullptr) {
    std::memcpy(h, x, sizeof(float) * rows * channels);
    return;
  }
  ops::cpu::AddLayerNormForwardParams<float, float> n{};
  n.x = x, n.y = y, n.gamma = g, n.beta = b;
  n.s = y ? x : nullptr;
  n.n = h, n.mean = mean, n.rstd = rstd;
  n.rows = rows, n.channels = channels, n.positions = 1, n.eps = eps;
  ops::cpu::add_layer_norm_forward(n);
  if (post_norm) std::memcpy(x, h, sizeof(float) * rows * channels);
}

// The naive kernel, or flash's.
inline void attention(const ops::AttentionForwardParams<float>& a, bool naive) {
  if (naive) {
    ops::cpu::naive_attention_forward(a);
  } else {
    ops::cpu::flash_attention_forward(a);
  }
}

}  // namespace nmt::fused
