// The whole encoder on the CPU as one plain C++ routine over raw pointers,
// for decoding (as model/decoder_step_cpu.h is for the decoder's steps): the
// embedding, then per layer the packed self-attention projection, the
// attention kernel over each sentence's own tokens, the output projection
// with its residual add and LayerNorm, and the feed-forward block. A
// sentence's encoding is LibTorch's dispatch-free: at batch 1 the op-by-op
// path spent more time between kernels than in them. Its dense layers are in
// the compute type chosen for decoding (ops/linear/packed_linear.h).
// No LibTorch here; runtime/cpu_model.cpp fills the parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/linear/packed_linear.h"

namespace nmt {

struct EncoderLayerCpu {
  const ops::PackedLinear* qkv;  // C -> 3C: q | k | v
  const ops::PackedLinear* out;  // C -> C
  const ops::PackedLinear* ff1;  // C -> F, without its bias (ff1_b, fused with the ReLU)
  const float* ff1_b;            // [F]
  const ops::PackedLinear* ff2;  // F -> C
  // Pre-norm (post-norm: the norms after the attention's and the
  // feed-forward block's residual adds, the layer's norm1 and norm2):
  const float *norm2_w, *norm2_b;  // before the feed-forward block
  const float *next_w, *next_b;    // the next layer's norm1, or the encoder's final norm
};

// Scratch for a batch of B sentences of S positions.
int64_t encoder_cpu_workspace_floats(int64_t batch, int64_t length, int64_t channels, int64_t heads,
                                     int64_t ff_dim, bool naive_attention);

struct EncoderCpuParams {
  int64_t batch;     // B
  int64_t length;    // S
  int64_t channels;  // C
  int64_t heads;     // H
  int64_t ff_dim;    // F
  int64_t vocab;     // V (source)
  const int64_t* tokens;       // tokens: [B, S], padded
  const int64_t* src_lengths;  // src_lengths: [B]; keys past a sentence's length are masked
  const float* embedding;      // embedding: [V, C] source table
  const float* position_table; // position_table: [P, C], P >= S
  float embed_scale;           // sqrt(C)
  const float *norm1_w, *norm1_b;  // the first layer's norm1 (null post-norm)
  double eps;                      // every LayerNorm's epsilon
  bool post_norm = false;          // LayerNorm after each residual add (TransformerOptions::post_norm)
  std::vector<EncoderLayerCpu> layers;
  bool naive_attention = false;  // the naive kernel (else flash)
  // Empty, or (B = 1, naive_attention) per layer a buffer [H, S, S] that gets
  // its self-attention probabilities (attention maps).
  std::vector<float*> self_probs;
  float* workspace;  // encoder_cpu_workspace_floats(...) floats
  float* memory;     // memory: [B, S, C] (written): the encoder's output after its final norm, zeros past each sentence's length
};

void encoder_cpu(const EncoderCpuParams& p);

}  // namespace nmt
