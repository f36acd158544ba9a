// Encoder-decoder Transformer (pre-LayerNorm residual blocks). The
// multi-head split/concat and projections are here; the softmax(QKᵀ)V core
// goes through ops::attention with a run-time backend.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "ops/attention/attention.h"
#include "tokenizer/special_ids.h"

namespace nmt {

// What every attention call in a model needs to know besides its tensors.
struct AttentionRuntime {
  ops::AttentionBackend backend = ops::AttentionBackend::kTorch;
  // Only for check-causality's negative test: decoder self-attention without
  // its causal mask, to show that the check detects leakage.
  bool disable_causal_mask = false;
};

struct MultiHeadAttentionOptions {
  MultiHeadAttentionOptions(int64_t d_model, int64_t heads) : d_model_(d_model), heads_(heads) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, heads);
};

class MultiHeadAttentionImpl : public torch::nn::Cloneable<MultiHeadAttentionImpl> {
 public:
  explicit MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options);
  void reset() override;
  // query: [B, Tq, C], memory: [B, Tk, C] (query itself for self-attention)
  // -> [B, Tq, C]. key_lengths: [B] or undefined.
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& memory,
                        const torch::Tensor& key_lengths, bool causal,
                        const AttentionRuntime& runtime);
  // query: [B, Tq, C] attends to already projected k, v: [B, H, Tk, D].
  torch::Tensor attend(const torch::Tensor& query, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& key_lengths, bool causal,
                       const AttentionRuntime& runtime);
  // [B, T, C] -> [B, H, T, D] view (no copy: the kernels take strides).
  torch::Tensor split_heads(const torch::Tensor& x) const;
  // Cross-attention probabilities [B, H, Tq, Tk] for display.
  torch::Tensor probs(const torch::Tensor& query, const torch::Tensor& memory,
                      const torch::Tensor& key_lengths);

  MultiHeadAttentionOptions options;
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};
};
TORCH_MODULE(MultiHeadAttention);

struct TransformerLayerOptions {
  TransformerLayerOptions(int64_t d_model, int64_t heads, int64_t ff_dim)
      : d_model_(d_model), heads_(heads), ff_dim_(ff_dim) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, heads);
  TORCH_ARG(int64_t, ff_dim);
  TORCH_ARG(double, dropout) = 0.1;
};

class EncoderLayerImpl : public torch::nn::Cloneable<EncoderLayerImpl> {
 public:
  explicit EncoderLayerImpl(const TransformerLayerOptions& options);
  void reset() override;
  // x: [B, S, C], src_lengths: [B] -> [B, S, C]
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& src_lengths,
                        const AttentionRuntime& runtime);

  TransformerLayerOptions options;
  MultiHeadAttention self_attn{nullptr};
  torch::nn::Linear ff1{nullptr}, ff2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(EncoderLayer);

// Keys/values an incremental decoder keeps per layer.
struct LayerCache {
  torch::Tensor self_k, self_v;    // [B, H, t, D]: one row per token decoded so far
  torch::Tensor cross_k, cross_v;  // [B, H, S, D]: the encoder output, projected once
};

struct DecoderCache {
  std::vector<LayerCache> layers;
  torch::Tensor src_lengths;  // [B]
  int64_t position = 0;       // tokens fed so far
  // Keeps rows `index` ([B'] int64) in that order (beam search).
  void reorder(const torch::Tensor& index);
};

class DecoderLayerImpl : public torch::nn::Cloneable<DecoderLayerImpl> {
 public:
  explicit DecoderLayerImpl(const TransformerLayerOptions& options);
  void reset() override;
  // y: [B, T, C], memory: [B, S, C], tgt_lengths/src_lengths: [B] -> [B, T, C]
  torch::Tensor forward(const torch::Tensor& y, const torch::Tensor& memory,
                        const torch::Tensor& tgt_lengths, const torch::Tensor& src_lengths,
                        const AttentionRuntime& runtime);
  // One new position: y: [B, 1, C]; appends its keys/values to cache.
  torch::Tensor forward_step(const torch::Tensor& y, LayerCache& cache,
                             const torch::Tensor& src_lengths, const AttentionRuntime& runtime);

  TransformerLayerOptions options;
  MultiHeadAttention self_attn{nullptr}, cross_attn{nullptr};
  torch::nn::Linear ff1{nullptr}, ff2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(DecoderLayer);

struct TransformerOptions {
  TransformerOptions(int64_t src_vocab, int64_t tgt_vocab)
      : src_vocab_(src_vocab), tgt_vocab_(tgt_vocab) {}
  TORCH_ARG(int64_t, src_vocab);
  TORCH_ARG(int64_t, tgt_vocab);
  TORCH_ARG(int64_t, d_model) = 128;
  TORCH_ARG(int64_t, heads) = 4;
  TORCH_ARG(int64_t, encoder_layers) = 3;
  TORCH_ARG(int64_t, decoder_layers) = 3;
  TORCH_ARG(int64_t, ff_dim) = 512;
  TORCH_ARG(double, dropout) = 0.1;
  TORCH_ARG(bool, tie_embeddings) = true;
  TORCH_ARG(int64_t, max_positions) = 256;
};

class TransformerImpl : public torch::nn::Cloneable<TransformerImpl> {
 public:
  explicit TransformerImpl(const TransformerOptions& options);
  void reset() override;

  // src: [B, S] ids, src_lengths: [B] -> memory [B, S, C]
  torch::Tensor encode(const torch::Tensor& src, const torch::Tensor& src_lengths);
  // tgt_in: [B, T] ids -> scaled embeddings + positions [B, T, C]
  torch::Tensor embed_target(const torch::Tensor& tgt_in);
  // y: [B, T, C] (from embed_target) -> logits [B, T, V]
  torch::Tensor decode_embedded(const torch::Tensor& y, const torch::Tensor& memory,
                                const torch::Tensor& tgt_lengths,
                                const torch::Tensor& src_lengths);
  // Incremental decoding: cross-attention keys/values computed once here,
  // then one token per decode_step. Same results as decode_embedded on the
  // whole prefix, without recomputing it.
  DecoderCache start_decoding(const torch::Tensor& memory, const torch::Tensor& src_lengths);
  // tokens: [B] (the last token of each row) -> logits [B, V] for the next.
  torch::Tensor decode_step(const torch::Tensor& tokens, DecoderCache& cache);
  // Cross-attention probabilities per decoder layer, [B, H, T, S] each, for
  // the teacher-forced input tgt_in: [B, T].
  std::vector<torch::Tensor> cross_attention_maps(const torch::Tensor& memory,
                                                  const torch::Tensor& src_lengths,
                                                  const torch::Tensor& tgt_in);
  // Teacher-forced logits: [B, T, V].
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_lengths,
                        const torch::Tensor& tgt_in, const torch::Tensor& tgt_lengths);

  void set_attention_backend(ops::AttentionBackend backend) { runtime_.backend = backend; }
  ops::AttentionBackend attention_backend() const { return runtime_.backend; }
  void set_disable_causal_mask(bool disable) { runtime_.disable_causal_mask = disable; }
  const TransformerOptions& options() const { return options_; }

  torch::nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};
  torch::nn::ModuleList encoder_layers{nullptr}, decoder_layers{nullptr};
  torch::nn::LayerNorm encoder_norm{nullptr}, decoder_norm{nullptr};
  torch::nn::Linear out_proj{nullptr};  // unused when embeddings are tied
  torch::nn::Dropout dropout{nullptr};

 private:
  torch::Tensor add_positions(const torch::Tensor& embedded, int64_t offset = 0);  // [B, T, C]
  torch::Tensor output_logits(const torch::Tensor& y);  // [..., C] -> [..., V]

  TransformerOptions options_;
  AttentionRuntime runtime_;
  torch::Tensor positions_;  // [max_positions, C] sinusoidal table (buffer)
};
TORCH_MODULE(Transformer);

// Number of parameters (tied weights counted once).
int64_t parameter_count(const torch::nn::Module& model);

}  // namespace nmt
