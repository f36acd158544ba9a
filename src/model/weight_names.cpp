#include "model/weight_names.h"

#include "config/config.h"

namespace nmt {

ModelShape model_shape(const ModelConfig& m, int64_t src_vocab, int64_t tgt_vocab) {
  ModelShape s;
  s.src_vocab = src_vocab, s.tgt_vocab = tgt_vocab;
  s.d_model = m.d_model, s.heads = m.heads, s.ff_dim = m.ff_dim;
  s.encoder_layers = m.encoder_layers, s.decoder_layers = m.decoder_layers;
  s.max_positions = m.max_positions;
  s.post_norm = m.norm == "post";
  s.tie_embeddings = m.tie_embeddings, s.tie_all = m.tie_all;
  return s;
}

namespace {

class SpecBuilder {
 public:
  explicit SpecBuilder(std::vector<WeightSpec>& out) : out_(out) {}
  void tensor(const std::string& name, ParamStack stack, int64_t layer, ParamRole role, ParamPart part,
              std::vector<int64_t> shape, std::vector<ParamUse> tied = {}) {
    out_.push_back({name, stack, layer, role, part, std::move(shape), std::move(tied)});
  }
  void dense(const std::string& scope, ParamStack stack, int64_t layer, ParamRole role, int64_t in, int64_t out) {
    tensor(scope + ".weight", stack, layer, role, ParamPart::kWeight, {in, out});
    tensor(scope + ".bias", stack, layer, role, ParamPart::kBias, {out});
  }
  void norm(const std::string& scope, ParamStack stack, int64_t layer, ParamRole role, int64_t c) {
    tensor(scope + ".weight", stack, layer, role, ParamPart::kWeight, {c});
    tensor(scope + ".bias", stack, layer, role, ParamPart::kBias, {c});
  }

 private:
  std::vector<WeightSpec>& out_;
};

}  // namespace

std::vector<WeightSpec> weight_specs(const ModelShape& m) {
  std::vector<WeightSpec> specs;
  SpecBuilder b(specs);
  using S = ParamStack;
  using R = ParamRole;
  const int64_t c = m.d_model, f = m.ff_dim;
  // The model's own parameters come first, then its submodules', in the
  // order they are registered (as LibTorch's named_parameters lists them).
  if (!m.tie_embeddings) {
    b.tensor("out_proj_weight", S::kOutput, -1, R::kOutProj, ParamPart::kWeight, {m.tgt_vocab, c});
    b.tensor("out_proj_bias", S::kOutput, -1, R::kOutProj, ParamPart::kBias, {m.tgt_vocab});
  }
  // Tied embeddings: the output projection is a use of the target
  // embedding; with tie_all both are uses of the one (source) table.
  std::vector<ParamUse> target_uses;
  if (m.tie_embeddings) target_uses.push_back({S::kOutput, -1, R::kOutProj});
  if (m.tie_all) {
    target_uses.push_back({S::kDecoder, -1, R::kEmbedding});
    b.tensor("shared_embed.weight", S::kEncoder, -1, R::kEmbedding, ParamPart::kWeight, {m.src_vocab, c},
             target_uses);
  } else {
    b.tensor("src_embed.weight", S::kEncoder, -1, R::kEmbedding, ParamPart::kWeight, {m.src_vocab, c});
    b.tensor("tgt_embed.weight", S::kDecoder, -1, R::kEmbedding, ParamPart::kWeight, {m.tgt_vocab, c}, target_uses);
  }
  for (int64_t n = 0; n < m.encoder_layers; ++n) {
    const std::string s = "encoder_layers." + std::to_string(n);
    b.dense(s + ".self_attn.qkv", S::kEncoder, n, R::kSelfQkv, c, 3 * c);
    b.dense(s + ".self_attn.out", S::kEncoder, n, R::kSelfOut, c, c);
    b.dense(s + ".ff1", S::kEncoder, n, R::kFf1, c, f);
    b.dense(s + ".ff2", S::kEncoder, n, R::kFf2, f, c);
    b.norm(s + ".norm1", S::kEncoder, n, R::kNorm1, c);
    b.norm(s + ".norm2", S::kEncoder, n, R::kNorm2, c);
  }
  for (int64_t n = 0; n < m.decoder_layers; ++n) {
    const std::string s = "decoder_layers." + std::to_string(n);
    b.dense(s + ".self_attn.qkv", S::kDecoder, n, R::kSelfQkv, c, 3 * c);
    b.dense(s + ".self_attn.out", S::kDecoder, n, R::kSelfOut, c, c);
    b.dense(s + ".cross_attn.q", S::kDecoder, n, R::kCrossQ, c, c);
    b.dense(s + ".cross_attn.kv", S::kDecoder, n, R::kCrossKv, c, 2 * c);
    b.dense(s + ".cross_attn.out", S::kDecoder, n, R::kCrossOut, c, c);
    b.dense(s + ".ff1", S::kDecoder, n, R::kFf1, c, f);
    b.dense(s + ".ff2", S::kDecoder, n, R::kFf2, f, c);
    b.norm(s + ".norm1", S::kDecoder, n, R::kNorm1, c);
    b.norm(s + ".norm2", S::kDecoder, n, R::kNorm2, c);
    b.norm(s + ".norm3", S::kDecoder, n, R::kNorm3, c);
  }
  if (!m.post_norm) {
    b.norm("encoder_norm", S::kEncoder, -1, R::kFinalNorm, c);
    b.norm("decoder_norm", S::kDecoder, -1, R::kFinalNorm, c);
  }
  return specs;
}

bool is_dense(ParamRole role) {
  switch (role) {
    case ParamRole::kSelfQkv:
    case ParamRole::kSelfOut:
    case ParamRole::kCrossQ:
    case ParamRole::kCrossKv:
    case ParamRole::kCrossOut:
    case ParamRole::kFf1:
    case ParamRole::kFf2:
      return true;
    default:
      return false;
  }
}

}  // namespace nmt
