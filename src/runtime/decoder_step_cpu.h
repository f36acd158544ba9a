// One incremental decoding step of the whole decoder, on the CPU, as a
// single plain C++ routine over raw pointers, on the kernels of ops/*/cpu
// (the embedding, add_layer_norm, the packed products, bias_relu and the
// attention row kernel). Its dense layers may also be bf16 or
// int8 (ops/linear/packed_linear.h: --compute-type); attention, LayerNorm
// and the residual stream stay float32. A step is about 15 ops per layer, each of
// which there costs a dispatch, an output allocation and a few views: with
// 32 rows on one core that was a quarter of the decoding time.
// No LibTorch here; runtime/cpu_model.cpp fills the parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/linear/packed_linear.h"

namespace nmt {

// One decoder layer: dense layers (weights [in, out] with their biases) and
// LayerNorm weights [C].
struct DecoderStepLayer {
  const ops::PackedLinear* qkv;        // C -> 3C: self-attention q | k | v
  const ops::PackedLinear* self_out;   // C -> C
  const ops::PackedLinear* q;          // C -> C: cross-attention query
  const ops::PackedLinear* cross_out;  // C -> C
  const ops::PackedLinear* ff1;        // C -> F, without its bias (ff1_b, fused with the ReLU)
  const float* ff1_b;                  // [F]
  const ops::PackedLinear* ff2;        // F -> C
  // Pre-norm (post-norm: the norms after the three residual adds, the
  // layer's norm1, norm2 and norm3):
  const float *norm2_w, *norm2_b;        // before cross-attention
  const float *norm3_w, *norm3_b;        // before the feed-forward block
  const float *next_w, *next_b;          // the next layer's norm1, or the decoder's final norm
  float* self_kv;                        // self_kv: [B, max_len, 2C], rows [0, position) filled
  const float* cross_kv;                 // cross_kv: [B, S, 2C], or [slots, S, 2C] read through cross_rows
  int64_t self_kv_stride_b, cross_kv_stride_b;  // their batch strides (rows are 2C apart)
  // Null, or (one row, naive attention) buffers that get the step's
  // attention probabilities: self_probs [H, position + 1], cross_probs [H, S].
  float* self_probs = nullptr;
  float* cross_probs = nullptr;
};

// Scratch for one step of up to `rows` rows (DecoderStepParams::workspace).
int64_t decoder_step_workspace_floats(int64_t rows, int64_t channels, int64_t heads, int64_t ff_dim,
                                      int64_t max_keys);

struct DecoderStepParams {
  int64_t rows;       // B
  int64_t channels;   // C
  int64_t heads;      // H
  int64_t ff_dim;     // F
  int64_t vocab;      // V
  int64_t max_len;    // positions the self-attention cache holds
  int64_t src_len;    // S
  const int64_t* tokens;       // tokens: [B], the newest token of each row
  const int64_t* positions;    // positions: [B], tokens each row has fed so far (< max_len)
  const int64_t* src_lengths;  // src_lengths: [B]
  // cross_rows: [B] or null: row b's encoder keys/values are cross_kv's
  // batch row cross_rows[b] (a beam sentence's hypotheses share one), else b.
  const int64_t* cross_rows = nullptr;
  const float* embedding;      // embedding: [V, C] target table
  const float* position_table; // position_table: [P, C], P > every position
  float embed_scale;           // sqrt(C)
  const float *norm1_w, *norm1_b;  // the first layer's norm1 (null post-norm)
  double eps;                      // every LayerNorm's epsilon
  bool post_norm = false;          // LayerNorm after each residual add (TransformerOptions::post_norm)
  std::vector<DecoderStepLayer> layers;
  const ops::PackedLinear* output;  // C -> V, the output projection
  bool naive_attention = false;  // the naive kernel (else flash's row kernel)
  float* workspace;    // decoder_step_workspace_floats(rows, ...) floats
  int64_t* key_lengths;  // key_lengths: [B] scratch
  float* logits;       // logits: [B, V] (written)
};

void decoder_step_cpu(const DecoderStepParams& p);

}  // namespace nmt
