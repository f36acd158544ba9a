#include "model/parameter_table.h"

#include "model/transformer.h"

namespace nmt {

namespace {

class TableBuilder {
 public:
  explicit TableBuilder(std::vector<ParamEntry>& out) : out_(out) {}
  void tensor(const std::string& name, ParamStack stack, int64_t layer, ParamRole role, ParamPart part,
              const at::Tensor& t, std::vector<ParamUse> tied = {}) {
    if (t.defined()) out_.push_back({name, stack, layer, role, part, t, std::move(tied)});
  }
  void dense(const std::string& scope, ParamStack stack, int64_t layer, ParamRole role, const Dense& d) {
    tensor(scope + ".weight", stack, layer, role, ParamPart::kWeight, d->weight);
    tensor(scope + ".bias", stack, layer, role, ParamPart::kBias, d->bias);
  }
  void norm(const std::string& scope, ParamStack stack, int64_t layer, ParamRole role,
            const torch::nn::LayerNorm& n) {
    tensor(scope + ".weight", stack, layer, role, ParamPart::kWeight, n->weight);
    tensor(scope + ".bias", stack, layer, role, ParamPart::kBias, n->bias);
  }

 private:
  std::vector<ParamEntry>& out_;
};

}  // namespace

std::vector<ParamEntry> parameter_table(const TransformerImpl& m) {
  std::vector<ParamEntry> table;
  TableBuilder b(table);
  using S = ParamStack;
  using R = ParamRole;
  // The model's own parameters come first, then its submodules', in the
  // order they were registered (as named_parameters lists them).
  b.tensor("out_proj_weight", S::kOutput, -1, R::kOutProj, ParamPart::kWeight, m.out_proj_weight);
  b.tensor("out_proj_bias", S::kOutput, -1, R::kOutProj, ParamPart::kBias, m.out_proj_bias);
  // Tied embeddings: the output projection is a use of the target
  // embedding; with tie_all both are uses of the one (source) table.
  const TransformerOptions& o = m.options();
  std::vector<ParamUse> target_uses;
  if (o.tie_embeddings()) target_uses.push_back({S::kOutput, -1, R::kOutProj});
  if (o.tie_all()) {
    target_uses.push_back({S::kDecoder, -1, R::kEmbedding});
    b.tensor("shared_embed.weight", S::kEncoder, -1, R::kEmbedding, ParamPart::kWeight, m.src_embed->weight,
             target_uses);
  } else {
    b.tensor("src_embed.weight", S::kEncoder, -1, R::kEmbedding, ParamPart::kWeight, m.src_embed->weight);
    b.tensor("tgt_embed.weight", S::kDecoder, -1, R::kEmbedding, ParamPart::kWeight, m.tgt_embed->weight,
             target_uses);
  }
  for (size_t i = 0; i < m.encoder_layers->size(); ++i) {
    const auto& l = *m.encoder_layers->ptr<EncoderLayerImpl>(i);
    const std::string s = "encoder_layers." + std::to_string(i);
    const int64_t n = static_cast<int64_t>(i);
    b.dense(s + ".self_attn.qkv", S::kEncoder, n, R::kSelfQkv, l.self_attn->qkv);
    b.dense(s + ".self_attn.out", S::kEncoder, n, R::kSelfOut, l.self_attn->out);
    b.dense(s + ".ff1", S::kEncoder, n, R::kFf1, l.ff1);
    b.dense(s + ".ff2", S::kEncoder, n, R::kFf2, l.ff2);
    b.norm(s + ".norm1", S::kEncoder, n, R::kNorm1, l.norm1);
    b.norm(s + ".norm2", S::kEncoder, n, R::kNorm2, l.norm2);
  }
  for (size_t i = 0; i < m.decoder_layers->size(); ++i) {
    const auto& l = *m.decoder_layers->ptr<DecoderLayerImpl>(i);
    const std::string s = "decoder_layers." + std::to_string(i);
    const int64_t n = static_cast<int64_t>(i);
    b.dense(s + ".self_attn.qkv", S::kDecoder, n, R::kSelfQkv, l.self_attn->qkv);
    b.dense(s + ".self_attn.out", S::kDecoder, n, R::kSelfOut, l.self_attn->out);
    b.dense(s + ".cross_attn.q", S::kDecoder, n, R::kCrossQ, l.cross_attn->q);
    b.dense(s + ".cross_attn.kv", S::kDecoder, n, R::kCrossKv, l.cross_attn->kv);
    b.dense(s + ".cross_attn.out", S::kDecoder, n, R::kCrossOut, l.cross_attn->out);
    b.dense(s + ".ff1", S::kDecoder, n, R::kFf1, l.ff1);
    b.dense(s + ".ff2", S::kDecoder, n, R::kFf2, l.ff2);
    b.norm(s + ".norm1", S::kDecoder, n, R::kNorm1, l.norm1);
    b.norm(s + ".norm2", S::kDecoder, n, R::kNorm2, l.norm2);
    b.norm(s + ".norm3", S::kDecoder, n, R::kNorm3, l.norm3);
  }
  if (m.encoder_norm) b.norm("encoder_norm", S::kEncoder, -1, R::kFinalNorm, m.encoder_norm);  // pre-norm only
  if (m.decoder_norm) b.norm("decoder_norm", S::kDecoder, -1, R::kFinalNorm, m.decoder_norm);
  return table;
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

const ParamEntry* find_param(const std::vector<ParamEntry>& table, ParamStack stack, int64_t layer, ParamRole role,
                             ParamPart part) {
  for (const ParamEntry& e : table) {
    if (e.part != part) continue;
    if (e.stack == stack && e.layer == layer && e.role == role) return &e;
    for (const ParamUse& u : e.tied)
      if (u.stack == stack && u.layer == layer && u.role == role) return &e;
  }
  return nullptr;
}

}  // namespace nmt
