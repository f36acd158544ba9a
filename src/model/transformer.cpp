#include "model/transformer.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "ops/activation/bias_relu_dropout.h"
#include "ops/cross_entropy/linear_cross_entropy.h"
#include "ops/embedding/embedding.h"
#include "ops/layer_norm/add_layer_norm.h"
#include "ops/linear/rows_matmul.h"

namespace nmt {

namespace nn = torch::nn;

namespace {

// The dtype matrix multiplies run in for a stream of dtype `stream`.
at::ScalarType side_dtype(const ModelRuntime& rt, at::ScalarType stream) {
  return rt.matmul_dtype == at::kBFloat16 && stream == at::kFloat ? at::kBFloat16 : stream;
}

// Attention dropout's sites: a layer's first_site plus this (plus 1 for the
// decoder's cross-attention), apart from the other sites so that adding them
// left every other site's masks as they were.
constexpr int64_t kAttentionSiteBase = 0x4000;

// Dropout of one site: counter-based, and only in training mode. row_starts:
// the rows it drops are sentences packed one after another (ops::Dropout).
ops::Dropout dropout_at(const ModelRuntime& rt, double p, int64_t site, bool training,
                        const at::Tensor& row_starts = {}) {
  ops::Dropout d;
  if (!training || p <= 0) return d;
  d.p = p, d.seed = rt.seed, d.step = rt.step, d.site = site, d.first_row = rt.first_row;
  d.row_starts = row_starts;
  return d;
}

// x + dropout(y + y_bias), then LayerNorm with `norm`'s weights: {sum, normalized}.
Stream add_norm(const at::Tensor& x, const at::Tensor& y, const at::Tensor& y_bias, const nn::LayerNorm& norm,
                const ops::Dropout& d, const ModelRuntime& rt) {
  const ops::AddLayerNormOutput o = ops::add_layer_norm(
      x, y, norm->weight, norm->bias, norm->options.eps(), d, side_dtype(rt, x.scalar_type()), y_bias);
  return {y.defined() ? o.sum : x, o.norm};
}

// Post-norm: LayerNorm(x + dropout(y + y_bias)) with `norm`'s weights is the
// new residual stream (float32) and, in the matmul dtype, what the next sublayer reads.
Stream add_then_norm(const at::Tensor& x, const at::Tensor& y, const at::Tensor& y_bias, const nn::LayerNorm& norm,
                     const ops::Dropout& d, const ModelRuntime& rt) {
  // The op takes y in its output's dtype: a bf16 sublayer output is widened
  // first, so that the stream stays float32.
  const at::Tensor y_wide = y.scalar_type() == x.scalar_type() ? y : y.to(x.scalar_type());
  const ops::AddLayerNormOutput o =
      ops::add_layer_norm(x, y_wide, norm->weight, norm->bias, norm->options.eps(), d, x.scalar_type(), y_bias);
  const at::ScalarType side = side_dtype(rt, x.scalar_type());
  return {o.norm, o.norm.scalar_type() == side ? o.norm : o.norm.to(side)};
}

// A sublayer's residual add: pre-norm normalizes the sum with `pre` (the
// next sublayer's own norm), post-norm with `post` (this sublayer's).
// y_bias: the bias of y's last product when that product left it out
// (left_bias), or undefined.
Stream residual(bool post_norm, const at::Tensor& x, const at::Tensor& y, const nn::LayerNorm& pre,
                const nn::LayerNorm& post, const ops::Dropout& d, const ModelRuntime& rt,
                const at::Tensor& y_bias = {}) {
  return post_norm ? add_then_norm(x, y, y_bias, post, d, rt) : add_norm(x, y, y_bias, pre, d, rt);
}

// Whether a sublayer's last product (an attention's output projection, the
// second feed-forward one) leaves its bias to the residual add after it:
// when training on the CPU, where ops::add_layer_norm adds it on its way
// through y and sums its gradient in its backward pass (in the product the
// bias cost a pass writing it into every output row, and one more over the
// gradient). Without gradients the products keep it.
bool bias_in_residual(const at::Tensor& x) { return x.is_cpu() && at::GradMode::is_enabled(); }
// The bias the residual add takes for `last`: none where the product added
// its own (own_bias), else the product's.
at::Tensor left_bias(bool own_bias, const Dense& last) { return own_bias ? at::Tensor() : last->bias; }

nn::LayerNorm make_norm(int64_t c) { return nn::LayerNorm(nn::LayerNormOptions({c})); }

// Glorot/Xavier uniform for an [in, out] block (symmetric in in/out).
void xavier_(at::Tensor w) {
  const double bound = std::sqrt(6.0 / static_cast<double>(w.size(0) + w.size(1)));
  w.uniform_(-bound, bound);
}

}  // namespace

// ---------------------------------------------------------------- Dense

at::Tensor dense_matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  // For the few rows of a decoding step, OpenBLAS's GEMM first copies
  // (packs) the whole weight matrix, which costs as much as the product:
  // rows_matmul reads it as it is.
  if (x.size(0) <= ops::kRowsMatmulMaxRows && ops::rows_matmul_applies(x, w)) return ops::rows_matmul(x, w, bias);
  return bias.defined() ? at::addmm(bias, x, w) : at::mm(x, w);
}

DenseImpl::DenseImpl(const DenseOptions& o) : options(o) { reset(); }

void DenseImpl::reset() {
  // torch::nn::Linear's default: U(-1/sqrt(in), 1/sqrt(in)) for both.
  const double bound = 1.0 / std::sqrt(static_cast<double>(options.in()));
  weight = register_parameter("weight", torch::empty({options.in(), options.out()}));
  at::NoGradGuard no_grad;
  weight.uniform_(-bound, bound);
  if (options.bias()) bias = register_parameter("bias", torch::empty({options.out()}).uniform_(-bound, bound));
}

at::Tensor DenseImpl::forward(const at::Tensor& x, bool with_bias) {
  const at::ScalarType t = x.scalar_type();
  at::Tensor x2 = x.reshape({-1, options.in()});  // [N, in]
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = options.out();
  const bool use_bias = with_bias && options.bias();
  if (ops::dense_applies(x2, weight)) {
    // Training on a GPU: the side copies where the trainer keeps them, the
    // weight gradient added into the optimizer's buffer (ops/linear/dense.h).
    const bool copies = is_training() && weight_side.defined() && weight_side.scalar_type() == t &&
                        (!use_bias || (bias_side.defined() && bias_side.scalar_type() == t));
    const auto side = [&](const at::Tensor& p, const at::Tensor& copy) {
      return p.scalar_type() == t ? p : copies ? copy : p.to(t);
    };
    return ops::dense(x2, weight, side(weight, weight_side), use_bias ? bias : at::Tensor(),
                      use_bias ? side(bias, bias_side) : at::Tensor())
        .view(shape);
  }
  const at::Tensor w = weight.scalar_type() == t ? weight : weight.to(t);
  const int64_t n = x2.size(0);
  // oneDNN compiles a bf16 kernel per matrix shape (about 1 ms each), and
  // batch shapes vary from step to step: rows padded to a multiple of
  // kMatmulRowQuantum keep the set of shapes small.
  if (t == at::kBFloat16) x2 = ops::pad_rows(x2, kMatmulRowQuantum);
  const at::Tensor y = dense_matmul(
      x2, w, use_bias ? (bias.scalar_type() == t ? bias : bias.to(t)) : at::Tensor());  // [N', out]
  // (a narrow of all the rows would still be recorded for autograd, whose
  // backward allocates zeros and copies the gradient into them)
  return (y.size(0) == n ? y : y.narrow(0, 0, n)).view(shape);
}

// ---------------------------------------------------------------- attention

SelfAttentionImpl::SelfAttentionImpl(const MultiHeadOptions& o) : options(o) { reset(); }

void SelfAttentionImpl::reset() {
  TORCH_CHECK(options.d_model() % options.heads() == 0, "heads must divide d_model");
  const int64_t c = options.d_model();
  qkv = register_module("qkv", Dense(DenseOptions(c, 3 * c)));
  out = register_module("out", Dense(DenseOptions(c, c)));
  at::NoGradGuard no_grad;
  for (int64_t i = 0; i < 3; ++i) xavier_(qkv->weight.narrow(1, i * c, c));  // as three [C, C] projections
  xavier_(out->weight);
  qkv->bias.zero_();
  out->bias.zero_();
}

at::Tensor SelfAttentionImpl::forward(const at::Tensor& h, const at::Tensor& key_lengths, bool causal,
                                      const ModelRuntime& rt, const ops::Dropout& dropout, const at::Tensor& starts,
                                      bool with_bias) {
  ops::AttentionOptions opts;
  opts.causal = causal;
  opts.key_lengths = key_lengths;
  opts.dropout = dropout;
  opts.query_starts = opts.key_starts = starts;
  return out(ops::self_attention(qkv(h), options.heads(), opts, rt.backend), with_bias);
}

CrossAttentionImpl::CrossAttentionImpl(const MultiHeadOptions& o) : options(o) { reset(); }

void CrossAttentionImpl::reset() {
  TORCH_CHECK(options.d_model() % options.heads() == 0, "heads must divide d_model");
  const int64_t c = options.d_model();
  q = register_module("q", Dense(DenseOptions(c, c)));
  kv = register_module("kv", Dense(DenseOptions(c, 2 * c)));
  out = register_module("out", Dense(DenseOptions(c, c)));
  at::NoGradGuard no_grad;
  xavier_(q->weight);
  for (int64_t i = 0; i < 2; ++i) xavier_(kv->weight.narrow(1, i * c, c));
  xavier_(out->weight);
  q->bias.zero_(), kv->bias.zero_(), out->bias.zero_();
}

at::Tensor CrossAttentionImpl::forward(const at::Tensor& h, const at::Tensor& kv_memory,
                                       const at::Tensor& key_lengths, const ModelRuntime& rt,
                                       const ops::Dropout& dropout, const at::Tensor& kv_starts, bool with_bias) {
  ops::AttentionOptions opts;
  opts.key_lengths = key_lengths;
  opts.dropout = dropout;
  opts.key_starts = kv_starts;
  return out(ops::cross_attention(q(h), kv_memory, options.heads(), opts, rt.backend), with_bias);
}

at::Tensor SelfAttentionImpl::probs(const at::Tensor& h, const at::Tensor& key_lengths, bool causal) {
  const int64_t c = options.d_model(), heads = options.heads();
  const at::Tensor packed = qkv(h);  // [B, T, 3C] = q | k | v
  const auto split = [&](const at::Tensor& t) {  // [B, T, C] -> [B, H, T, D]
    return t.reshape({t.size(0), t.size(1), heads, c / heads}).transpose(1, 2).to(at::kFloat);
  };
  ops::AttentionOptions opts;
  opts.causal = causal;
  opts.key_lengths = key_lengths;
  return ops::attention_probs(split(packed.narrow(2, 0, c)), split(packed.narrow(2, c, c)), opts);
}

at::Tensor CrossAttentionImpl::probs(const at::Tensor& h, const at::Tensor& kv_memory,
                                     const at::Tensor& key_lengths) {
  const int64_t c = options.d_model(), heads = options.heads();
  const auto split = [&](const at::Tensor& t) {  // [B, T, C] -> [B, H, T, D]
    return t.reshape({t.size(0), t.size(1), heads, c / heads}).transpose(1, 2).to(at::kFloat);
  };
  ops::AttentionOptions opts;
  opts.key_lengths = key_lengths;
  return ops::attention_probs(split(q(h)), split(kv_memory.narrow(2, 0, c)), opts);
}

// ---------------------------------------------------------------- layers

EncoderLayerImpl::EncoderLayerImpl(const TransformerLayerOptions& o) : options(o) { reset(); }

void EncoderLayerImpl::reset() {
  const TransformerLayerOptions& o = options;
  self_attn = register_module("self_attn", SelfAttention(MultiHeadOptions(o.d_model(), o.heads())));
  ff1 = register_module("ff1", Dense(DenseOptions(o.d_model(), o.ff_dim())));
  ff2 = register_module("ff2", Dense(DenseOptions(o.ff_dim(), o.d_model())));
  norm1 = register_module("norm1", make_norm(o.d_model()));
  norm2 = register_module("norm2", make_norm(o.d_model()));
}

Stream EncoderLayerImpl::forward(const Stream& in, const at::Tensor& src_lengths, const NextNorm& next,
                                 const ModelRuntime& rt, AttentionMaps* record, const at::Tensor& starts) {
  // Pre-LayerNorm residual blocks: x + f(LN(x)); in.h is already LN1(x).
  // Post-LayerNorm: LN1(x + f(x)), then LN2(x + g(x)); in.h is x.
  const int64_t site = options.first_site();
  const bool post = options.post_norm();
  const double p = options.dropout();
  if (record != nullptr) record->encoder_self.push_back(self_attn->probs(in.h, src_lengths, /*causal=*/false));
  const bool own_bias = !bias_in_residual(in.x);
  const at::Tensor a =
      self_attn(in.h, src_lengths, /*causal=*/false, rt,
                dropout_at(rt, options.attention_dropout(), kAttentionSiteBase + site, is_training()), starts, own_bias);
  // (packed rows draw their masks where the padded ones would: starts)
  const Stream s = residual(post, in.x, a, norm2, norm1, dropout_at(rt, p, site, is_training(), starts), rt,
                            left_bias(own_bias, self_attn->out));
  const at::Tensor f =
      ff2(ops::bias_relu_dropout(ff1(s.h, /*with_bias=*/false), ff1->bias,
                                 dropout_at(rt, options.relu_dropout(), site + 1, is_training(), starts)),
          own_bias);
  return residual(post, s.x, f, next, norm2, dropout_at(rt, p, site + 2, is_training(), starts), rt,
                  left_bias(own_bias, ff2));
}

DecoderLayerImpl::DecoderLayerImpl(const TransformerLayerOptions& o) : options(o) { reset(); }

void DecoderLayerImpl::reset() {
  const TransformerLayerOptions& o = options;
  const MultiHeadOptions mha(o.d_model(), o.heads());
  self_attn = register_module("self_attn", SelfAttention(mha));
  cross_attn = register_module("cross_attn", CrossAttention(mha));
  ff1 = register_module("ff1", Dense(DenseOptions(o.d_model(), o.ff_dim())));
  ff2 = register_module("ff2", Dense(DenseOptions(o.ff_dim(), o.d_model())));
  norm1 = register_module("norm1", make_norm(o.d_model()));
  norm2 = register_module("norm2", make_norm(o.d_model()));
  norm3 = register_module("norm3", make_norm(o.d_model()));
}

Stream DecoderLayerImpl::feed_forward(const Stream& in, const NextNorm& next, const ModelRuntime& rt) {
  const int64_t site = options.first_site();
  const double p = options.dropout();
  const bool own_bias = !bias_in_residual(in.x);
  const at::Tensor f =
      ff2(ops::bias_relu_dropout(ff1(in.h, /*with_bias=*/false), ff1->bias,
                                 dropout_at(rt, options.relu_dropout(), site + 2, is_training())),
          own_bias);
  return residual(options.post_norm(), in.x, f, next, norm3, dropout_at(rt, p, site + 3, is_training()), rt,
                  left_bias(own_bias, ff2));
}

Stream DecoderLayerImpl::forward(const Stream& in, const at::Tensor& memory_kv,
                                 const at::Tensor& tgt_lengths, const at::Tensor& src_lengths,
                                 const NextNorm& next, const ModelRuntime& rt, AttentionMaps* record,
                                 const at::Tensor& memory_starts) {
  const int64_t site = options.first_site();
  const double p = options.dropout();
  // Masked self-attention: causal + target padding. Each row's residual adds
  // only that position's own input, so no future token leaks through it.
  const bool causal = !rt.disable_causal_mask;
  if (record != nullptr) record->decoder_self.push_back(self_attn->probs(in.h, tgt_lengths, causal));
  const double pa = options.attention_dropout();
  const bool own_bias = !bias_in_residual(in.x);
  const at::Tensor a = self_attn(in.h, tgt_lengths, causal, rt,
                                 dropout_at(rt, pa, kAttentionSiteBase + site, is_training()), at::Tensor(), own_bias);
  const bool post = options.post_norm();
  const Stream s1 = residual(post, in.x, a, norm2, norm1, dropout_at(rt, p, site, is_training()), rt,
                             left_bias(own_bias, self_attn->out));
  if (record != nullptr) record->cross.push_back(cross_attn->probs(s1.h, memory_kv, src_lengths));
  // Cross-attention: queries from the decoder, keys/values from the encoder.
  const at::Tensor c = cross_attn(s1.h, memory_kv, src_lengths, rt,
                                  dropout_at(rt, pa, kAttentionSiteBase + site + 1, is_training()), memory_starts,
                                  own_bias);
  const Stream s2 = residual(post, s1.x, c, norm3, norm2, dropout_at(rt, p, site + 1, is_training()), rt,
                             left_bias(own_bias, cross_attn->out));
  return feed_forward(s2, next, rt);
}

Stream DecoderLayerImpl::forward_step(const Stream& in, LayerCache& cache, const at::Tensor& positions,
                                      int64_t max_position, const at::Tensor& src_lengths, const NextNorm& next,
                                      const ModelRuntime& rt) {
  // The sublayers of forward() for one new position per row: its keys and
  // values go into the cache at the row's position, and it attends to the
  // cached ones up to there, which is exactly its causal row.
  const int64_t c = options.d_model(), rows = in.h.size(0);
  const at::Tensor qkv = self_attn->qkv(in.h);  // [B, 1, 3C]
  // Each row at its own position: key lengths position + 1 each.
  const at::Tensor row = at::arange(rows, positions.options());
  cache.self_kv.index_put_({row, positions}, qkv.select(1, 0).narrow(1, c, 2 * c));
  ops::AttentionOptions opts;
  opts.key_lengths = positions + 1;
  const at::Tensor a = self_attn->out(ops::cross_attention(
      qkv.narrow(2, 0, c), cache.self_kv.narrow(1, 0, max_position + 1), options.heads(), opts, rt.backend));
  const bool post = options.post_norm();
  const Stream s1 = residual(post, in.x, a, norm2, norm1, {}, rt);
  const Stream s2 = residual(post, s1.x, cross_attn(s1.h, cache.cross_kv, src_lengths, rt), norm3, norm2, {}, rt);
  return feed_forward(s2, next, rt);
}

// ---------------------------------------------------------------- Transformer

TransformerImpl::TransformerImpl(const TransformerOptions& o) : options_(o) { reset(); }

void TransformerImpl::reset() {
  const TransformerOptions& o = options_;
  const int64_t c = o.d_model();
  const auto embedding = [&](int64_t vocab) {
    return nn::Embedding(nn::EmbeddingOptions(vocab, c).padding_idx(kPadId));
  };
  if (o.tie_all()) {
    TORCH_CHECK(o.src_vocab() == o.tgt_vocab(), "tie_all needs one vocabulary: source ", o.src_vocab(),
                " and target ", o.tgt_vocab(), " tokens");
    TORCH_CHECK(o.tie_embeddings(), "tie_all ties the output projection too: it needs tie_embeddings");
    src_embed = tgt_embed = register_module("shared_embed", embedding(o.src_vocab()));
  } else {
    src_embed = register_module("src_embed", embedding(o.src_vocab()));
    tgt_embed = register_module("tgt_embed", embedding(o.tgt_vocab()));
  }
  {
    // Unit-variance after the sqrt(C) scaling in the forward pass.
    at::NoGradGuard no_grad;
    for (const nn::Embedding& e : o.tie_all() ? std::vector{src_embed} : std::vector{src_embed, tgt_embed}) {
      e->weight.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(c)));
      e->weight[kPadId].zero_();
    }
  }
  // Dropout sites: 0 source embedding, 1 target embedding, then the layers'.
  int64_t site = 2;
  const TransformerLayerOptions layer = TransformerLayerOptions(c, o.heads(), o.ff_dim())
                                            .dropout(o.dropout())
                                            .activation_dropout(o.activation_dropout())
                                            .attention_dropout(o.attention_dropout())
                                            .post_norm(o.post_norm());
  encoder_layers = register_module("encoder_layers", nn::ModuleList());
  decoder_layers = register_module("decoder_layers", nn::ModuleList());
  for (int64_t i = 0; i < o.encoder_layers(); ++i, site += EncoderLayerImpl::kSites)
    encoder_layers->push_back(EncoderLayer(TransformerLayerOptions(layer).first_site(site)));
  for (int64_t i = 0; i < o.decoder_layers(); ++i, site += DecoderLayerImpl::kSites)
    decoder_layers->push_back(DecoderLayer(TransformerLayerOptions(layer).first_site(site)));
  if (!o.post_norm()) {
    encoder_norm = register_module("encoder_norm", make_norm(c));
    decoder_norm = register_module("decoder_norm", make_norm(c));
  }
  if (!o.tie_embeddings()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(c));
    out_proj_weight = register_parameter("out_proj_weight", torch::empty({o.tgt_vocab(), c}));
    out_proj_bias = register_parameter("out_proj_bias", torch::empty({o.tgt_vocab()}));
    at::NoGradGuard no_grad;
    out_proj_weight.uniform_(-bound, bound);
    out_proj_bias.uniform_(-bound, bound);
  }

  // Sinusoidal positions: PE[t, 2i] = sin(t / 10000^(2i/C)), PE[t, 2i+1] = cos(...).
  const at::Tensor t = torch::arange(o.max_positions(), torch::kFloat).unsqueeze(1);
  const at::Tensor i2 = torch::arange(0, c, 2, torch::kFloat);
  const at::Tensor angle = t * torch::exp(i2 * (-std::log(10000.0) / static_cast<double>(c)));
  at::Tensor pe = torch::zeros({o.max_positions(), c});
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, c, 2)}, torch::sin(angle));
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, c, 2)},
                torch::cos(angle).narrow(1, 0, c / 2));
  positions_ = register_buffer("positions", pe);
}

namespace {

// Layer i's successor norm: the next layer's first, or the stack's final one.
template <typename Layer>
const NextNorm& next_norm(const nn::ModuleList& layers, size_t i, const nn::LayerNorm& final) {
  return i + 1 < layers->size() ? layers->ptr<Layer>(i + 1)->norm1 : final;
}

}  // namespace

at::Tensor TransformerImpl::embedded(const at::Tensor& ids, const nn::Embedding& table, int64_t site,
                                     int64_t position_offset) {
  TORCH_CHECK(position_offset + ids.size(1) <= options_.max_positions(), "sequence of ",
              position_offset + ids.size(1), " tokens exceeds model.max_positions ",
              options_.max_positions());
  return ops::embed_tokens(ids, table->weight, positions_.to(table->weight.scalar_type()), position_offset,
                           std::sqrt(static_cast<double>(options_.d_model())), kPadId,
                           dropout_at(runtime_, options_.dropout(), site, is_training()));
}

Stream TransformerImpl::embed(const at::Tensor& ids, const nn::Embedding& table, int64_t site,
                              int64_t position_offset, const NextNorm& first_norm) {
  return enter(embedded(ids, table, site, position_offset), first_norm);
}

Stream TransformerImpl::enter(const at::Tensor& x, const NextNorm& first_norm) {
  if (!options_.post_norm()) return add_norm(x, {}, {}, first_norm, {}, runtime_);
  const at::ScalarType side = side_dtype(runtime_, x.scalar_type());
  return {x, x.scalar_type() == side ? x : x.to(side)};
}

double TransformerImpl::norm_eps() const {
  return encoder_layers->ptr<EncoderLayerImpl>(0)->norm1->options.eps();
}

at::Tensor TransformerImpl::encode(const at::Tensor& src, const at::Tensor& src_lengths, AttentionMaps* record) {
  Stream s = embed(src, src_embed, 0, 0, encoder_layers->ptr<EncoderLayerImpl>(0)->norm1);
  for (size_t i = 0; i < encoder_layers->size(); ++i)
    s = encoder_layers->ptr<EncoderLayerImpl>(i)->forward(
        s, src_lengths, next_norm<EncoderLayerImpl>(encoder_layers, i, encoder_norm), runtime_, record);
  return s.h;
}

bool TransformerImpl::packed_encoder_applies(const at::Tensor& src) const {
  // (Dropout masks are the padded rows': the embedding's is drawn before the
  // rows are gathered, the residuals' and the feed-forward's at each packed
  // row's sentence and position, attention's in the kernels at their own.)
  return runtime_.packed_encoder && src.is_cpu() && src.dim() == 2 &&
         runtime_.backend == ops::AttentionBackend::kFlash;
}

at::Tensor TransformerImpl::encode_packed(const at::Tensor& src, const at::Tensor& src_lengths,
                                          const at::Tensor& starts) {
  // Sentence b's positions [0, len_b) as rows of the flattened [B·S, C]
  // embeddings (padding positions are never gathered).
  const int64_t batch = src.size(0), width = src.size(1), c = options_.d_model();
  TORCH_CHECK(starts.numel() == batch + 1, "encode_packed: starts must have B + 1 = ", batch + 1, " entries");
  const int64_t* first = starts.data_ptr<int64_t>();
  const int64_t n = first[batch];
  at::Tensor index = at::empty({n}, at::kLong);
  int64_t* row = index.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = first[b + 1] - first[b];
    TORCH_CHECK(len >= 0 && len <= width, "encode_packed: sentence ", b, " of ", len, " tokens in rows of ", width);
    for (int64_t t = 0; t < len; ++t) *row++ = b * width + t;
  }
  const at::Tensor x = embedded(src, src_embed, 0, 0);  // [B, S, C], dropout as padded
  Stream s = enter(x.reshape({batch * width, c}).index_select(0, index.to(x.device())).view({1, n, c}),
                   encoder_layers->ptr<EncoderLayerImpl>(0)->norm1);
  for (size_t i = 0; i < encoder_layers->size(); ++i)
    s = encoder_layers->ptr<EncoderLayerImpl>(i)->forward(
        s, src_lengths, next_norm<EncoderLayerImpl>(encoder_layers, i, encoder_norm), runtime_, nullptr, starts);
  return s.h;  // [1, N, C]
}

at::Tensor TransformerImpl::embed_target(const at::Tensor& tgt_in) {
  return ops::embed_tokens(tgt_in, tgt_embed->weight, positions_.to(tgt_embed->weight.scalar_type()),
                           0, std::sqrt(static_cast<double>(options_.d_model())), kPadId,
                           dropout_at(runtime_, options_.dropout(), 1, is_training()));
}

Stream TransformerImpl::decode_stream(const at::Tensor& y, const at::Tensor& memory,
                                      const at::Tensor& tgt_lengths, const at::Tensor& src_lengths,
                                      AttentionMaps* record, const at::Tensor& memory_starts) {
  Stream s = enter(y, decoder_layers->ptr<DecoderLayerImpl>(0)->norm1);
  for (size_t i = 0; i < decoder_layers->size(); ++i) {
    auto layer = decoder_layers->ptr<DecoderLayerImpl>(i);
    s = layer->forward(s, layer->cross_attn->project_memory(memory), tgt_lengths, src_lengths,
                       next_norm<DecoderLayerImpl>(decoder_layers, i, decoder_norm), runtime_, record, memory_starts);
  }
  return s;
}

at::Tensor TransformerImpl::decode_hidden(const at::Tensor& y, const at::Tensor& memory,
                                          const at::Tensor& tgt_lengths, const at::Tensor& src_lengths) {
  return decode_stream(y, memory, tgt_lengths, src_lengths).h;
}

at::Tensor TransformerImpl::output_weight() const {
  return options_.tie_embeddings() ? tgt_embed->weight : out_proj_weight;
}

at::Tensor TransformerImpl::output_logits(const at::Tensor& h) {
  const at::Tensor w = output_weight();  // [V, C]
  const at::Tensor h2 = h.to(w.scalar_type()).reshape({-1, h.size(-1)});
  std::vector<int64_t> shape = h.sizes().vec();
  shape.back() = w.size(0);
  return dense_matmul(h2, w.t(), options_.tie_embeddings() ? at::Tensor() : out_proj_bias).view(shape);
}

at::Tensor TransformerImpl::step_output_table() const {
  const at::Tensor w = output_weight();  // [V, C]
  if (!w.device().is_cpu() || w.scalar_type() != at::kFloat) return {};
  return w.detach().t().contiguous();  // [C, V]
}

at::Tensor TransformerImpl::step_logits(const at::Tensor& h, const DecoderCache& cache) {
  const at::Tensor h2 = h.reshape({-1, h.size(-1)});  // [B, C]
  if (!cache.output_weight_t.defined() || h2.size(0) > ops::kRowsMatmulMaxRows ||
      !ops::rows_matmul_applies(h2, cache.output_weight_t))
    return output_logits(h).squeeze(1);
  return ops::rows_matmul(h2, cache.output_weight_t, options_.tie_embeddings() ? at::Tensor() : out_proj_bias);
}

at::Tensor TransformerImpl::decode_embedded(const at::Tensor& y, const at::Tensor& memory,
                                            const at::Tensor& tgt_lengths,
                                            const at::Tensor& src_lengths) {
  return output_logits(decode_hidden(y, memory, tgt_lengths, src_lengths));
}

at::Tensor TransformerImpl::forward(const at::Tensor& src, const at::Tensor& src_lengths,
                                    const at::Tensor& tgt_in, const at::Tensor& tgt_lengths) {
  return decode_embedded(embed_target(tgt_in), encode(src, src_lengths), tgt_lengths, src_lengths);
}

at::Tensor TransformerImpl::loss_sum(const at::Tensor& src, const at::Tensor& src_lengths,
                                     const at::Tensor& tgt_in, const at::Tensor& tgt_lengths,
                                     const at::Tensor& labels, double smoothing, at::Tensor* nll_sum) {
  // The encoder on its sentences' own rows where it may: a batch sorted by
  // target length still pads its sources (17% of configs/real.yaml's source
  // positions), and every product, norm and activation of the encoder and
  // the cross-attention keys and values would pay for them.
  const bool packed = packed_encoder_applies(src);
  const at::Tensor starts = packed ? ops::packed_starts(src_lengths) : at::Tensor();
  const at::Tensor memory = packed ? encode_packed(src, src_lengths, starts) : encode(src, src_lengths);
  const at::Tensor h = decode_stream(embed_target(tgt_in), memory, tgt_lengths, src_lengths, nullptr, starts)
                           .h;  // [B, T, C]
  return ops::linear_cross_entropy(h.reshape({-1, h.size(2)}), output_weight(),
                                   options_.tie_embeddings() ? at::Tensor() : out_proj_bias,
                                   labels.reshape({-1}), smoothing, kPadId, nll_sum);
}

DecoderCache TransformerImpl::start_decoding(const at::Tensor& memory, const at::Tensor& src_lengths,
                                             int64_t max_len, bool output_table) {
  DecoderCache cache;
  cache.src_lengths = src_lengths;
  if (output_table) cache.output_weight_t = step_output_table();
  const int64_t c = options_.d_model();
  for (size_t i = 0; i < decoder_layers->size(); ++i) {
    auto layer = decoder_layers->ptr<DecoderLayerImpl>(i);
    cache.layers.push_back({at::empty({memory.size(0), max_len, 2 * c}, memory.options()),
                            layer->cross_attn->project_memory(memory)});
  }
  return cache;
}

at::Tensor TransformerImpl::decode_step(const at::Tensor& tokens, const at::Tensor& positions, int64_t max_position,
                                        DecoderCache& cache) {
  TORCH_CHECK(max_position < cache.layers.front().self_kv.size(1), "decode_step: the cache holds ",
              cache.layers.front().self_kv.size(1), " positions");
  TORCH_CHECK(max_position < options_.max_positions(), "sequence of ", max_position + 1,
              " tokens exceeds model.max_positions ", options_.max_positions());
  const int64_t rows = tokens.size(0), c = options_.d_model();
  // The embedding kernel adds table[t] at position t: rows at their own
  // positions are one sequence of B tokens over a table of each row's
  // position, which computes exactly what each row gets alone.
  const at::Tensor table = positions_.to(tgt_embed->weight.scalar_type());
  const at::Tensor x = ops::embed_tokens(tokens.view({1, rows}), tgt_embed->weight, table.index_select(0, positions),
                                         0, std::sqrt(static_cast<double>(c)), kPadId, {})
                           .view({rows, 1, c});
  Stream s = enter(x, decoder_layers->ptr<DecoderLayerImpl>(0)->norm1);
  // Shared encoder keys/values (cross_rows) gathered per row for LibTorch's
  // ops; the self-attention cache stays the one written.
  const at::Tensor cross_rows =
      cache.cross_rows.defined() ? cache.cross_rows.to(cache.layers.front().cross_kv.device()) : at::Tensor();
  for (size_t i = 0; i < decoder_layers->size(); ++i) {
    LayerCache layer = cache.layers[i];
    if (cross_rows.defined()) layer.cross_kv = layer.cross_kv.index_select(0, cross_rows);
    s = decoder_layers->ptr<DecoderLayerImpl>(i)->forward_step(
        s, layer, positions, max_position, cache.src_lengths,
        next_norm<DecoderLayerImpl>(decoder_layers, i, decoder_norm), runtime_);
  }
  return step_logits(s.h, cache);  // [B, V]
}

AttentionMaps TransformerImpl::attention_maps(const at::Tensor& src, const at::Tensor& src_lengths,
                                              const at::Tensor& tgt_in, const at::Tensor& tgt_lengths) {
  at::NoGradGuard no_grad;
  // The teacher-forced passes themselves, each layer recording the
  // probabilities its attention applies.
  AttentionMaps maps;
  const at::Tensor memory = encode(src, src_lengths, &maps);
  decode_stream(embed_target(tgt_in), memory, tgt_lengths, src_lengths, &maps);
  return maps;
}

int64_t parameter_count(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

}  // namespace nmt
