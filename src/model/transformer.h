// Encoder-decoder Transformer (pre-LayerNorm residual blocks, or post-LayerNorm
// ones: TransformerOptions::post_norm) built on the
// fused ops: every residual add is fused with the LayerNorm that follows it
// (ops/layer_norm), the feed-forward middle with its bias and dropout
// (ops/activation), embeddings with their scale, positions and dropout
// (ops/embedding), the output projection with the loss
// (ops/cross_entropy), and attention reads its heads straight out of packed
// projections (ops/attention). Dropout is counter-based: a mask depends on
// (seed, step, site, global row, position, channel) only.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <vector>

#include "model/parameter_table.h"
#include "ops/attention/attention.h"
#include "ops/linear/dense.h"
#include "ops/random/dropout.h"
#include "tokenizer/special_ids.h"

namespace nmt {

// What a forward pass needs besides its tensors; owned by the Transformer,
// passed down to its layers.
struct ModelRuntime {
  ops::AttentionBackend backend = ops::AttentionBackend::kTorch;
  // Only for check-causality's negative test: decoder self-attention without
  // its causal mask, to show that the check detects leakage.
  bool disable_causal_mask = false;
  // Training's encoder on its sentences' own rows where it applies
  // (TransformerImpl::packed_encoder_applies); false keeps the padded rows
  // (tests compare the two).
  bool packed_encoder = true;
  // Matrix multiplies in this dtype (kBFloat16: weights cast per use,
  // master weights, residual stream, LayerNorm and loss stay float32).
  at::ScalarType matmul_dtype = at::kFloat;
  // Dropout coordinates of the current step (training mode only).
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t first_row = 0;  // global batch row of this batch's row 0
};

// The residual stream and what the next sublayer reads, as every block
// passes them on: x [B, T, C] in the parameters' dtype; h in the matmul
// dtype, LayerNorm(x) (pre-norm) or x itself (post-norm, where x is a
// LayerNorm's output already).
struct Stream {
  at::Tensor x, h;
};

// bf16 matrix multiplies run on row counts rounded up to this (see Dense).
constexpr int64_t kMatmulRowQuantum = ops::kBf16RowQuantum;
// x: [N, in] times w: [in, out] (+ bias: [out], or undefined) -> [N, out]: a dense
// layer's product, through ops::rows_matmul for a few rows, else LibTorch's GEMM.
at::Tensor dense_matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);

struct DenseOptions {
  DenseOptions(int64_t in, int64_t out) : in_(in), out_(out) {}
  TORCH_ARG(int64_t, in);
  TORCH_ARG(int64_t, out);
  TORCH_ARG(bool, bias) = true;
};

// y = x · weight + bias with weight stored [in, out], so both matrix
// operands are read row-major (oneDNN's bf16 kernels are several times
// faster that way for some of our shapes than with torch::nn::Linear's [out, in]).
class DenseImpl : public torch::nn::Cloneable<DenseImpl> {
 public:
  explicit DenseImpl(const DenseOptions& options);
  void reset() override;
  // x: [..., in] -> [..., out] in x's dtype (weights cast to it).
  // with_bias = false leaves the bias to the caller's next (fused) op.
  at::Tensor forward(const at::Tensor& x, bool with_bias = true);

  DenseOptions options;
  at::Tensor weight;  // [in, out]
  at::Tensor bias;    // [out]
  // Copies of weight and bias in the matrix side's dtype that a trainer
  // keeps current (bf16 training on a GPU: train/train_step.h), read by the
  // training-mode forward instead of casting the weights every step; not
  // parameters, not saved. Undefined otherwise.
  at::Tensor weight_side, bias_side;
};
TORCH_MODULE(Dense);

// The shape of a multi-head attention module (the op's own options are
// ops::AttentionOptions: masks and lengths of one call).
struct MultiHeadOptions {
  MultiHeadOptions(int64_t d_model, int64_t heads) : d_model_(d_model), heads_(heads) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, heads);
};

// Self-attention with one packed projection: qkv = h · [Wq | Wk | Wv].
class SelfAttentionImpl : public torch::nn::Cloneable<SelfAttentionImpl> {
 public:
  explicit SelfAttentionImpl(const MultiHeadOptions& options);
  void reset() override;
  // h: [B, T, C] -> [B, T, C]; key_lengths: [B] or undefined; dropout: on
  // the attention probabilities (inactive by default).
  // starts (CPU flash): h is [1, N, C], sentences packed one after another
  // from the rows starts: [B + 1] gives (ops::AttentionOptions::query_starts).
  // with_bias = false leaves the output projection's bias to the caller's
  // next (fused) op.
  at::Tensor forward(const at::Tensor& h, const at::Tensor& key_lengths, bool causal,
                     const ModelRuntime& rt, const ops::Dropout& dropout = {}, const at::Tensor& starts = {},
                     bool with_bias = true);
  // The probabilities [B, H, T, T] forward applies, for display.
  at::Tensor probs(const at::Tensor& h, const at::Tensor& key_lengths, bool causal);

  MultiHeadOptions options;
  Dense qkv{nullptr}, out{nullptr};
};
TORCH_MODULE(SelfAttention);

// Cross-attention: queries from the decoder, keys/values (one packed
// projection) from the encoder output.
class CrossAttentionImpl : public torch::nn::Cloneable<CrossAttentionImpl> {
 public:
  explicit CrossAttentionImpl(const MultiHeadOptions& options);
  void reset() override;
  // h: [B, Tq, C] attends to kv: [B, Tk, 2C] (= project_memory) -> [B, Tq, C];
  // with kv_starts ([B + 1], CPU flash) kv is [1, N, 2C], sentences packed.
  // with_bias as in SelfAttentionImpl::forward.
  at::Tensor forward(const at::Tensor& h, const at::Tensor& kv, const at::Tensor& key_lengths,
                     const ModelRuntime& rt, const ops::Dropout& dropout = {}, const at::Tensor& kv_starts = {},
                     bool with_bias = true);
  // memory: [B, Tk, C] -> kv: [B, Tk, 2C]
  at::Tensor project_memory(const at::Tensor& memory) { return kv(memory); }
  // The probabilities [B, H, Tq, Tk] applied to h's queries, for display.
  at::Tensor probs(const at::Tensor& h, const at::Tensor& kv_memory, const at::Tensor& key_lengths);

  MultiHeadOptions options;
  Dense q{nullptr}, kv{nullptr}, out{nullptr};
};
TORCH_MODULE(CrossAttention);

struct TransformerLayerOptions {
  TransformerLayerOptions(int64_t d_model, int64_t heads, int64_t ff_dim)
      : d_model_(d_model), heads_(heads), ff_dim_(ff_dim) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, heads);
  TORCH_ARG(int64_t, ff_dim);
  TORCH_ARG(double, dropout) = 0.1;
  TORCH_ARG(double, activation_dropout) = -1;  // after the feed-forward ReLU; -1: dropout's
  TORCH_ARG(double, attention_dropout) = 0;    // on the attention probabilities
  TORCH_ARG(bool, post_norm) = false;          // see TransformerOptions::post_norm
  TORCH_ARG(int64_t, first_site) = 0;  // the layer's dropout sites start here

 public:
  // The dropout after the feed-forward ReLU.
  double relu_dropout() const { return activation_dropout_ < 0 ? dropout_ : activation_dropout_; }
};

// Attention probabilities per layer, as the model applies them.
struct AttentionMaps {
  std::vector<at::Tensor> encoder_self;  // [B, H, S, S] per encoder layer
  std::vector<at::Tensor> decoder_self;  // [B, H, T, T] per decoder layer (causal: upper triangle 0)
  std::vector<at::Tensor> cross;         // [B, H, T, S] per decoder layer
};

// The LayerNorm the next block starts with (or the stack's final norm).
using NextNorm = torch::nn::LayerNorm;

class EncoderLayerImpl : public torch::nn::Cloneable<EncoderLayerImpl> {
 public:
  static constexpr int64_t kSites = 3;
  explicit EncoderLayerImpl(const TransformerLayerOptions& options);
  void reset() override;
  // Pre-norm: in.h = norm1(in.x); returns {x', next(x')}. Post-norm: next
  // is not used (the layer's own norm2 ends it). src_lengths: [B]. record:
  // if set, the self-attention probabilities are appended to it. starts:
  // the stream is [1, N, C], sentences packed (SelfAttentionImpl::forward).
  Stream forward(const Stream& in, const at::Tensor& src_lengths, const NextNorm& next,
                 const ModelRuntime& rt, AttentionMaps* record = nullptr, const at::Tensor& starts = {});

  TransformerLayerOptions options;
  SelfAttention self_attn{nullptr};
  Dense ff1{nullptr}, ff2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
};
TORCH_MODULE(EncoderLayer);

// Keys/values an incremental decoder keeps per layer.
struct LayerCache {
  at::Tensor self_kv;   // [B, max_len, 2C]: rows [0, t) hold the tokens decoded so far
  at::Tensor cross_kv;  // [B, S, 2C]: the encoder output, projected once
};

struct DecoderCache {
  std::vector<LayerCache> layers;
  at::Tensor src_lengths;  // [B]
  // [B] long, or undefined (row b reads cross_kv row b): row b's encoder
  // keys/values are cross_kv[cross_rows[b]], so that a running batch keeps
  // one copy per sentence, which its beam hypotheses share.
  at::Tensor cross_rows;
  // The output projection as [C, V] contiguous, made once per decode: the
  // step's few rows then run on ops::rows_matmul instead of a GEMM that
  // repacks the [V, C] table every step. Undefined where that kernel does not
  // apply (bf16, CUDA); logits are then taken from the table as it is.
  at::Tensor output_weight_t;
};

class DecoderLayerImpl : public torch::nn::Cloneable<DecoderLayerImpl> {
 public:
  static constexpr int64_t kSites = 4;
  explicit DecoderLayerImpl(const TransformerLayerOptions& options);
  void reset() override;
  // Pre-norm: in.h = norm1(in.x) (post-norm: next is not used, norm3 ends
  // the layer); memory_kv: [B, S, 2C] from cross_attn->project_memory.
  // record: if set, the self- and cross-attention probabilities are appended.
  // memory_starts: memory_kv is [1, N, 2C], sentences packed (TransformerImpl::encode_packed).
  Stream forward(const Stream& in, const at::Tensor& memory_kv, const at::Tensor& tgt_lengths,
                 const at::Tensor& src_lengths, const NextNorm& next, const ModelRuntime& rt,
                 AttentionMaps* record = nullptr, const at::Tensor& memory_starts = {});
  // One new position per row, in: [B, 1, C]; its keys/values go into the
  // cache at the row's position. positions: [B] (long, tokens fed so far per
  // row; max_position the largest).
  Stream forward_step(const Stream& in, LayerCache& cache, const at::Tensor& positions, int64_t max_position,
                      const at::Tensor& src_lengths, const NextNorm& next, const ModelRuntime& rt);

  TransformerLayerOptions options;
  SelfAttention self_attn{nullptr};
  CrossAttention cross_attn{nullptr};
  Dense ff1{nullptr}, ff2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};

 private:
  Stream feed_forward(const Stream& in, const NextNorm& next, const ModelRuntime& rt);
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
  TORCH_ARG(double, activation_dropout) = -1;  // after the feed-forward ReLU; -1: dropout's
  TORCH_ARG(double, attention_dropout) = 0;    // on the attention probabilities
  // false (pre-norm): x + f(LayerNorm_k(x)) per sublayer k, and each stack
  // ends with its final norm (encoder_norm, decoder_norm). true (post-norm,
  // the original Transformer's): LayerNorm_k(x + f(x)) per sublayer k, no
  // final norms (encoder_norm and decoder_norm stay null), and the
  // embeddings enter the first layer as they are.
  TORCH_ARG(bool, post_norm) = false;
  TORCH_ARG(bool, tie_embeddings) = true;
  // One matrix for the source embedding, the target embedding and the output
  // projection (needs src_vocab == tgt_vocab: one shared vocabulary, and
  // tie_embeddings).
  TORCH_ARG(bool, tie_all) = false;
  TORCH_ARG(int64_t, max_positions) = 256;
};

struct TransformerTestSeam;

class TransformerImpl : public torch::nn::Cloneable<TransformerImpl> {
 public:
  explicit TransformerImpl(const TransformerOptions& options);
  void reset() override;

  // src: [B, S] ids, src_lengths: [B] -> memory [B, S, C] (after encoder_norm);
  // record: if set, each layer's self-attention probabilities.
  at::Tensor encode(const at::Tensor& src, const at::Tensor& src_lengths, AttentionMaps* record = nullptr);
  // tgt_in: [B, T] ids -> scaled embeddings + positions [B, T, C] (the residual stream)
  at::Tensor embed_target(const at::Tensor& tgt_in);
  // y: [B, T, C] (from embed_target) -> the decoder's output after decoder_norm [B, T, C]
  at::Tensor decode_hidden(const at::Tensor& y, const at::Tensor& memory,
                           const at::Tensor& tgt_lengths, const at::Tensor& src_lengths);
  // -> logits [B, T, V]
  at::Tensor decode_embedded(const at::Tensor& y, const at::Tensor& memory,
                             const at::Tensor& tgt_lengths, const at::Tensor& src_lengths);
  // Teacher-forced logits: [B, T, V].
  at::Tensor forward(const at::Tensor& src, const at::Tensor& src_lengths,
                     const at::Tensor& tgt_in, const at::Tensor& tgt_lengths);
  // Teacher-forced label-smoothed cross-entropy, summed over the non-pad
  // labels [B, T], without forming [B, T, V] logits (ops/cross_entropy);
  // nll_sum (optional): the same sum without smoothing, not differentiable.
  at::Tensor loss_sum(const at::Tensor& src, const at::Tensor& src_lengths, const at::Tensor& tgt_in,
                      const at::Tensor& tgt_lengths, const at::Tensor& labels, double smoothing,
                      at::Tensor* nll_sum = nullptr);

  // Incremental decoding (a GPU's, and LibTorch's attention on the CPU):
  // cross-attention keys/values computed once here, then one token per row
  // per decode_step (at most max_len). Same results as decode_embedded on
  // the whole prefix, without recomputing it.
  // output_table = false leaves DecoderCache::output_weight_t unset (a
  // caller that only wants the cross-attention keys/values, or keeps its own).
  DecoderCache start_decoding(const at::Tensor& memory, const at::Tensor& src_lengths,
                              int64_t max_len, bool output_table = true);
  // tokens: [B] (the last token of each row) -> logits [B, V] for the
  // next; positions: [B] long on the device, the tokens each row has fed so
  // far (rows of a running batch joined at different steps); max_position
  // their largest. Each row gets what it gets alone.
  at::Tensor decode_step(const at::Tensor& tokens, const at::Tensor& positions, int64_t max_position,
                         DecoderCache& cache);
  // The output projection as [C, V] contiguous for DecoderCache::output_weight_t
  // (float32 on the CPU; undefined otherwise).
  at::Tensor step_output_table() const;
  // Every attention probability of a teacher-forced pass over src: [B, S]
  // and tgt_in: [B, T] (for display: the explorer, translate --attention-map),
  // recorded by the layers' own forward passes.
  AttentionMaps attention_maps(const at::Tensor& src, const at::Tensor& src_lengths,
                               const at::Tensor& tgt_in, const at::Tensor& tgt_lengths);

  void set_attention_backend(ops::AttentionBackend backend) { runtime_.backend = backend; }
  ops::AttentionBackend attention_backend() const { return runtime_.backend; }
  void set_disable_causal_mask(bool disable) { runtime_.disable_causal_mask = disable; }
  void set_matmul_dtype(at::ScalarType dtype) { runtime_.matmul_dtype = dtype; }
  at::ScalarType matmul_dtype() const { return runtime_.matmul_dtype; }
  // Dropout coordinates for the next forward passes (see ModelRuntime).
  void set_dropout_step(uint64_t seed, int64_t step, int64_t first_row) {
    runtime_.seed = seed, runtime_.step = step, runtime_.first_row = first_row;
  }
  const TransformerOptions& options() const { return options_; }

  // With tie_all both are the one module, registered once as "shared_embed"
  // (so its weight is one parameter: counted, saved and updated once, its
  // gradient the sum of its three uses).
  torch::nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};
  torch::nn::ModuleList encoder_layers{nullptr}, decoder_layers{nullptr};
  torch::nn::LayerNorm encoder_norm{nullptr}, decoder_norm{nullptr};  // pre-norm only
  // Every LayerNorm's epsilon (they share one).
  double norm_eps() const;
  at::Tensor out_proj_weight, out_proj_bias;  // [V, C], [V]; only without tied embeddings

 private:
  // Tests switch the packed encoder off through it (tests/support/seams.h);
  // the product never does.
  friend struct TransformerTestSeam;
  // x [B, T, C] (embedded) -> the stream entering the first block:
  // {x, first_norm(x)} pre-norm, {x, x} post-norm.
  Stream enter(const at::Tensor& x, const NextNorm& first_norm);
  // ids [B, T] -> scaled embeddings + positions [B, T, C], with the dropout of `site`.
  at::Tensor embedded(const at::Tensor& ids, const torch::nn::Embedding& table, int64_t site, int64_t position_offset);
  // ids [B, T] -> the stream entering the first block (enter()).
  Stream embed(const at::Tensor& ids, const torch::nn::Embedding& table, int64_t site,
               int64_t position_offset, const NextNorm& first_norm);
  Stream decode_stream(const at::Tensor& y, const at::Tensor& memory, const at::Tensor& tgt_lengths,
                       const at::Tensor& src_lengths, AttentionMaps* record = nullptr,
                       const at::Tensor& memory_starts = {});
  // Whether the encoder may run on its sentences' own rows (encode_packed):
  // on the CPU with flash attention (its kernels take packed sentences).
  bool packed_encoder_applies(const at::Tensor& src) const;
  // src: [B, S] ids -> memory [1, N, C]: only each sentence's own positions,
  // one sentence after another (N = the sum of src_lengths, starts [B + 1]
  // where each begins); per position the same as encode()'s.
  at::Tensor encode_packed(const at::Tensor& src, const at::Tensor& src_lengths, const at::Tensor& starts);
  at::Tensor output_weight() const;  // [V, C]
  at::Tensor output_logits(const at::Tensor& h);  // [..., C] -> [..., V] in float32/64
  // h: [B, 1, C] -> logits [B, V], from cache.output_weight_t where set.
  at::Tensor step_logits(const at::Tensor& h, const DecoderCache& cache);

  TransformerOptions options_;
  ModelRuntime runtime_;
  at::Tensor positions_;  // [max_positions, C] sinusoidal table (buffer)
};
TORCH_MODULE(Transformer);

// Number of parameters (tied weights counted once).
int64_t parameter_count(const torch::nn::Module& model);

}  // namespace nmt
