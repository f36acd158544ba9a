#include "model/transformer.h"

#include <cmath>

namespace nmt {

namespace nn = torch::nn;

MultiHeadAttentionImpl::MultiHeadAttentionImpl(const MultiHeadAttentionOptions& opts)
    : options(opts) {
  reset();
}

void MultiHeadAttentionImpl::reset() {
  TORCH_CHECK(options.d_model() % options.heads() == 0, "heads must divide d_model");
  const int64_t c = options.d_model();
  q_proj = register_module("q_proj", nn::Linear(c, c));
  k_proj = register_module("k_proj", nn::Linear(c, c));
  v_proj = register_module("v_proj", nn::Linear(c, c));
  out_proj = register_module("out_proj", nn::Linear(c, c));
  for (auto* lin : {&q_proj, &k_proj, &v_proj, &out_proj}) {
    nn::init::xavier_uniform_((*lin)->weight);
    nn::init::zeros_((*lin)->bias);
  }
}

torch::Tensor MultiHeadAttentionImpl::split_heads(const torch::Tensor& x) const {
  const int64_t h = options.heads();
  return x.view({x.size(0), x.size(1), h, x.size(2) / h}).transpose(1, 2);
}

torch::Tensor MultiHeadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& memory,
                                              const torch::Tensor& key_lengths, bool causal,
                                              const AttentionRuntime& runtime) {
  return attend(query, split_heads(k_proj(memory)), split_heads(v_proj(memory)), key_lengths,
                causal, runtime);
}

torch::Tensor MultiHeadAttentionImpl::attend(const torch::Tensor& query, const torch::Tensor& k,
                                             const torch::Tensor& v,
                                             const torch::Tensor& key_lengths, bool causal,
                                             const AttentionRuntime& runtime) {
  const torch::Tensor q = split_heads(q_proj(query));  // [B, H, Tq, D]
  ops::AttentionOptions opts;
  opts.causal = causal;
  opts.key_lengths = key_lengths;
  const torch::Tensor o = ops::attention(q, k, v, opts, runtime.backend);  // [B, H, Tq, D]
  // concat heads: [B, H, Tq, D] -> [B, Tq, C]
  return out_proj(o.transpose(1, 2).reshape({query.size(0), query.size(1), options.d_model()}));
}

torch::Tensor MultiHeadAttentionImpl::probs(const torch::Tensor& query,
                                            const torch::Tensor& memory,
                                            const torch::Tensor& key_lengths) {
  ops::AttentionOptions opts;
  opts.key_lengths = key_lengths;
  return ops::attention_probs(split_heads(q_proj(query)), split_heads(k_proj(memory)), opts);
}

EncoderLayerImpl::EncoderLayerImpl(const TransformerLayerOptions& o) : options(o) { reset(); }

void EncoderLayerImpl::reset() {
  const TransformerLayerOptions& o = options;
  self_attn = register_module("self_attn", MultiHeadAttention(MultiHeadAttentionOptions(o.d_model(), o.heads())));
  ff1 = register_module("ff1", nn::Linear(o.d_model(), o.ff_dim()));
  ff2 = register_module("ff2", nn::Linear(o.ff_dim(), o.d_model()));
  norm1 = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({o.d_model()})));
  norm2 = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({o.d_model()})));
  dropout = register_module("dropout", nn::Dropout(o.dropout()));
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& src_lengths,
                                        const AttentionRuntime& runtime) {
  // Pre-LayerNorm residual blocks: x + f(LN(x)); stable without long warmup.
  const torch::Tensor h = norm1(x);
  torch::Tensor out = x + dropout(self_attn(h, h, src_lengths, /*causal=*/false, runtime));
  return out + dropout(ff2(dropout(torch::relu(ff1(norm2(out))))));
}

DecoderLayerImpl::DecoderLayerImpl(const TransformerLayerOptions& o) : options(o) { reset(); }

void DecoderLayerImpl::reset() {
  const TransformerLayerOptions& o = options;
  const MultiHeadAttentionOptions mha(o.d_model(), o.heads());
  self_attn = register_module("self_attn", MultiHeadAttention(mha));
  cross_attn = register_module("cross_attn", MultiHeadAttention(mha));
  ff1 = register_module("ff1", nn::Linear(o.d_model(), o.ff_dim()));
  ff2 = register_module("ff2", nn::Linear(o.ff_dim(), o.d_model()));
  norm1 = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({o.d_model()})));
  norm2 = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({o.d_model()})));
  norm3 = register_module("norm3", nn::LayerNorm(nn::LayerNormOptions({o.d_model()})));
  dropout = register_module("dropout", nn::Dropout(o.dropout()));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& y, const torch::Tensor& memory,
                                        const torch::Tensor& tgt_lengths,
                                        const torch::Tensor& src_lengths,
                                        const AttentionRuntime& runtime) {
  // Masked self-attention: causal + target padding. Each row's residual adds
  // only that position's own input, so no future token leaks through it.
  const torch::Tensor h = norm1(y);
  const bool causal = !runtime.disable_causal_mask;
  torch::Tensor out = y + dropout(self_attn(h, h, tgt_lengths, causal, runtime));
  // Cross-attention: queries from the decoder, keys/values from the encoder.
  out = out + dropout(cross_attn(norm2(out), memory, src_lengths, /*causal=*/false, runtime));
  return out + dropout(ff2(dropout(torch::relu(ff1(norm3(out))))));
}

torch::Tensor DecoderLayerImpl::forward_step(const torch::Tensor& y, LayerCache& cache,
                                             const torch::Tensor& src_lengths,
                                             const AttentionRuntime& runtime) {
  // The same sublayers as forward(); the newest position attends to every
  // cached one, which is exactly its causal row.
  const torch::Tensor h = norm1(y);  // [B, 1, C]
  const torch::Tensor k_new = self_attn->split_heads(self_attn->k_proj(h));
  const torch::Tensor v_new = self_attn->split_heads(self_attn->v_proj(h));
  cache.self_k = cache.self_k.defined() ? torch::cat({cache.self_k, k_new}, 2) : k_new;
  cache.self_v = cache.self_v.defined() ? torch::cat({cache.self_v, v_new}, 2) : v_new;
  torch::Tensor out =
      y + dropout(self_attn->attend(h, cache.self_k, cache.self_v, {}, /*causal=*/false, runtime));
  out = out + dropout(cross_attn->attend(norm2(out), cache.cross_k, cache.cross_v, src_lengths,
                                         /*causal=*/false, runtime));
  return out + dropout(ff2(dropout(torch::relu(ff1(norm3(out))))));
}

void DecoderCache::reorder(const torch::Tensor& index) {
  for (auto& l : layers) {
    if (l.self_k.defined()) l.self_k = l.self_k.index_select(0, index);
    if (l.self_v.defined()) l.self_v = l.self_v.index_select(0, index);
    l.cross_k = l.cross_k.index_select(0, index);
    l.cross_v = l.cross_v.index_select(0, index);
  }
  src_lengths = src_lengths.index_select(0, index);
}

TransformerImpl::TransformerImpl(const TransformerOptions& o) : options_(o) { reset(); }

void TransformerImpl::reset() {
  const TransformerOptions& o = options_;
  const int64_t c = o.d_model();
  src_embed = register_module("src_embed", nn::Embedding(nn::EmbeddingOptions(o.src_vocab(), c).padding_idx(kPadId)));
  tgt_embed = register_module("tgt_embed", nn::Embedding(nn::EmbeddingOptions(o.tgt_vocab(), c).padding_idx(kPadId)));
  {
    // Unit-variance after the sqrt(C) scaling in the forward pass.
    torch::NoGradGuard no_grad;
    src_embed->weight.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(c)));
    tgt_embed->weight.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(c)));
    src_embed->weight[kPadId].zero_();
    tgt_embed->weight[kPadId].zero_();
  }
  const TransformerLayerOptions layer(c, o.heads(), o.ff_dim());
  encoder_layers = register_module("encoder_layers", nn::ModuleList());
  decoder_layers = register_module("decoder_layers", nn::ModuleList());
  for (int64_t i = 0; i < o.encoder_layers(); ++i)
    encoder_layers->push_back(EncoderLayer(TransformerLayerOptions(layer).dropout(o.dropout())));
  for (int64_t i = 0; i < o.decoder_layers(); ++i)
    decoder_layers->push_back(DecoderLayer(TransformerLayerOptions(layer).dropout(o.dropout())));
  encoder_norm = register_module("encoder_norm", nn::LayerNorm(nn::LayerNormOptions({c})));
  decoder_norm = register_module("decoder_norm", nn::LayerNorm(nn::LayerNormOptions({c})));
  if (!o.tie_embeddings()) out_proj = register_module("out_proj", nn::Linear(c, o.tgt_vocab()));
  dropout = register_module("dropout", nn::Dropout(o.dropout()));

  // Sinusoidal positions: PE[t, 2i] = sin(t / 10000^(2i/C)), PE[t, 2i+1] = cos(...).
  const torch::Tensor t = torch::arange(o.max_positions(), torch::kFloat).unsqueeze(1);
  const torch::Tensor i2 = torch::arange(0, c, 2, torch::kFloat);
  const torch::Tensor angle = t * torch::exp(i2 * (-std::log(10000.0) / static_cast<double>(c)));
  torch::Tensor pe = torch::zeros({o.max_positions(), c});
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, c, 2)}, torch::sin(angle));
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, c, 2)},
                torch::cos(angle).narrow(1, 0, c / 2));
  positions_ = register_buffer("positions", pe);
}

torch::Tensor TransformerImpl::add_positions(const torch::Tensor& embedded, int64_t offset) {
  const int64_t t = embedded.size(1);
  TORCH_CHECK(offset + t <= options_.max_positions(), "sequence of ", offset + t,
              " tokens exceeds model.max_positions ", options_.max_positions());
  const double scale = std::sqrt(static_cast<double>(options_.d_model()));
  return dropout(embedded * scale + positions_.narrow(0, offset, t).unsqueeze(0));
}

torch::Tensor TransformerImpl::output_logits(const torch::Tensor& y) {
  return options_.tie_embeddings() ? torch::matmul(y, tgt_embed->weight.t()) : out_proj(y);
}

DecoderCache TransformerImpl::start_decoding(const torch::Tensor& memory,
                                             const torch::Tensor& src_lengths) {
  DecoderCache cache;
  cache.src_lengths = src_lengths;
  for (const auto& layer : *decoder_layers) {
    auto& cross = layer->as<DecoderLayer>()->cross_attn;
    cache.layers.push_back({torch::Tensor(), torch::Tensor(),
                            cross->split_heads(cross->k_proj(memory)),
                            cross->split_heads(cross->v_proj(memory))});
  }
  return cache;
}

torch::Tensor TransformerImpl::decode_step(const torch::Tensor& tokens, DecoderCache& cache) {
  torch::Tensor y = add_positions(tgt_embed(tokens).unsqueeze(1), cache.position);  // [B, 1, C]
  size_t i = 0;
  for (const auto& layer : *decoder_layers)
    y = layer->as<DecoderLayer>()->forward_step(y, cache.layers[i++], cache.src_lengths, runtime_);
  ++cache.position;
  return output_logits(decoder_norm(y)).squeeze(1);  // [B, V]
}

std::vector<torch::Tensor> TransformerImpl::cross_attention_maps(const torch::Tensor& memory,
                                                                 const torch::Tensor& src_lengths,
                                                                 const torch::Tensor& tgt_in) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> maps;
  torch::Tensor y = embed_target(tgt_in);
  const torch::Tensor tgt_lengths = torch::full({tgt_in.size(0)}, tgt_in.size(1), src_lengths.options());
  for (const auto& item : *decoder_layers) {
    auto layer = item->as<DecoderLayer>();
    // The probabilities this layer's cross-attention applies, at its input.
    const torch::Tensor h = layer->norm1(y);
    const torch::Tensor mid = y + layer->self_attn(h, h, tgt_lengths, true, runtime_);
    maps.push_back(layer->cross_attn->probs(layer->norm2(mid), memory, src_lengths));
    y = layer->forward(y, memory, tgt_lengths, src_lengths, runtime_);
  }
  return maps;
}

torch::Tensor TransformerImpl::encode(const torch::Tensor& src, const torch::Tensor& src_lengths) {
  torch::Tensor x = add_positions(src_embed(src));  // [B, S, C]
  for (const auto& layer : *encoder_layers)
    x = layer->as<EncoderLayer>()->forward(x, src_lengths, runtime_);
  return encoder_norm(x);
}

torch::Tensor TransformerImpl::embed_target(const torch::Tensor& tgt_in) {
  return add_positions(tgt_embed(tgt_in));
}

torch::Tensor TransformerImpl::decode_embedded(const torch::Tensor& y_in,
                                               const torch::Tensor& memory,
                                               const torch::Tensor& tgt_lengths,
                                               const torch::Tensor& src_lengths) {
  torch::Tensor y = y_in;
  for (const auto& layer : *decoder_layers)
    y = layer->as<DecoderLayer>()->forward(y, memory, tgt_lengths, src_lengths, runtime_);
  return output_logits(decoder_norm(y));
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& src, const torch::Tensor& src_lengths,
                                       const torch::Tensor& tgt_in,
                                       const torch::Tensor& tgt_lengths) {
  const torch::Tensor memory = encode(src, src_lengths);
  return decode_embedded(embed_target(tgt_in), memory, tgt_lengths, src_lengths);
}

int64_t parameter_count(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

}  // namespace nmt
