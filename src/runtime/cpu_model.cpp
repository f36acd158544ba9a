#include "runtime/cpu_model.h"

#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "runtime/encoder_cpu.h"
#include "util/errors.h"

namespace nmt::runtime {

// A weight of the model, found by its use: the spec and its values. Outside
// the anonymous namespace because CpuModel::Layers holds it (GCC warns of a
// class whose field has an internal type when, in a unity batch, this file is
// no longer the main one).
struct Weight : WeightSpec {
  const float* data = nullptr;
};

namespace {

const float* data_of(const std::vector<Weight>& table, ParamStack stack, int64_t layer, ParamRole role,
                     ParamPart part) {
  const Weight* w = find_weight(table, stack, layer, role, part);
  return w != nullptr ? w->data : nullptr;
}

// Where a fused routine's layer wants its LayerNorm weights and ff1's bias
// (norm1 and the final norm cross layers: place_norms puts those); nullptr
// for the rest.
template <typename Layer>
const float** norm_slot(Layer& l, ParamRole role, ParamPart part) {
  const bool w = part == ParamPart::kWeight;
  switch (role) {
    case ParamRole::kFf1: return w ? nullptr : &l.ff1_b;
    case ParamRole::kNorm2: return w ? &l.norm2_w : &l.norm2_b;
    case ParamRole::kNorm3:
      if constexpr (std::is_same_v<Layer, DecoderStepLayer>) return w ? &l.norm3_w : &l.norm3_b;
      return nullptr;
    default: return nullptr;
  }
}

// One stack's LayerNorm weights and ff1 biases, by role. Pre-norm: layer
// 0's norm1 to first_w / first_b; layer i's "next" norm is layer i + 1's
// norm1, or the stack's final norm. Post-norm: the routines' slots are the
// norms at a layer's residual adds in order (the encoder's norm2 and next
// slots, the decoder's norm2, norm3 and next), which are its own norm1,
// norm2 (and norm3); first_w / first_b stay null.
template <typename Layer>
void place_norms(const std::vector<Weight>& table, ParamStack stack, std::vector<Layer>& layers,
                 const float*& first_w, const float*& first_b, bool post_norm) {
  constexpr bool kDecoder = std::is_same_v<Layer, DecoderStepLayer>;
  first_w = first_b = nullptr;
  for (const Weight& e : table) {
    if (e.stack != stack) continue;
    const float* ptr = e.data;
    const bool w = e.part == ParamPart::kWeight;
    if (post_norm && e.layer >= 0 && e.role != ParamRole::kFf1) {
      Layer& l = layers[static_cast<size_t>(e.layer)];
      const float** slot = nullptr;
      if (e.role == ParamRole::kNorm1) {
        slot = w ? &l.norm2_w : &l.norm2_b;
      } else if (e.role == ParamRole::kNorm2) {
        if constexpr (kDecoder) slot = w ? &l.norm3_w : &l.norm3_b;
        else slot = w ? &l.next_w : &l.next_b;
      } else if (e.role == ParamRole::kNorm3) {
        slot = w ? &l.next_w : &l.next_b;
      }
      if (slot != nullptr) *slot = ptr;
    } else if (e.role == ParamRole::kFinalNorm) {
      (w ? layers.back().next_w : layers.back().next_b) = ptr;
    } else if (e.role == ParamRole::kNorm1 && e.layer == 0) {
      (w ? first_w : first_b) = ptr;
    } else if (e.role == ParamRole::kNorm1) {
      Layer& before = layers[static_cast<size_t>(e.layer - 1)];
      (w ? before.next_w : before.next_b) = ptr;
    } else if (e.layer >= 0) {
      if (const float** slot = norm_slot(layers[static_cast<size_t>(e.layer)], e.role, e.part)) *slot = ptr;
    }
  }
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

// Every weight by role, the dense layers packed, and the encoder's and the
// decoder step's layers pointing at them.
struct CpuModel::Layers {
  std::vector<Weight> table;
  struct Encoder {
    ops::PackedLinear qkv, out, ff1, ff2;  // ff1 without its bias (fused with the ReLU)
  };
  struct Decoder {
    ops::PackedLinear qkv, self_out, q, cross_kv, cross_out, ff1, ff2;
  };
  std::vector<Encoder> encoder;
  std::vector<Decoder> decoder;
  ops::PackedLinear output;  // C -> V
  std::vector<EncoderLayerCpu> encoder_layers;
  std::vector<DecoderStepLayer> decoder_layers;
  const float *enc_norm1_w = nullptr, *enc_norm1_b = nullptr, *dec_norm1_w = nullptr, *dec_norm1_b = nullptr;
  const float* src_embedding = nullptr;
  const float* tgt_embedding = nullptr;
  const float* positions = nullptr;
};

CpuModel::CpuModel(const ModelShape& shape, WeightSet weights, const CpuModelOptions& options,
                   const std::string& source)
    : shape_(shape), options_(options), weights_(std::move(weights)) {
  if (!options_.packed && options_.type != ops::ComputeType::kFloat32)
    throw std::invalid_argument("CpuModel: unpacked views are float32 only");
  auto layers = std::make_shared<Layers>();
  // Every weight the shape names, of the shape it names: a checkpoint whose
  // weights disagree with its own config is corrupt, not something to run.
  for (WeightSpec& spec : weight_specs(shape_)) {
    const auto it = weights_.tensors.find(spec.name);
    if (it == weights_.tensors.end()) throw InputError(source + ": weight " + spec.name + " is missing");
    if (it->second.shape != spec.shape)
      throw InputError(source + ": weight " + spec.name + " has shape " + shape_text(it->second.shape) +
                       ", the model's config gives it " + shape_text(spec.shape));
    Weight w;
    static_cast<WeightSpec&>(w) = std::move(spec);
    w.data = it->second.data;
    layers->table.push_back(std::move(w));
  }
  const auto positions = weights_.tensors.find(kPositionsName);
  const std::vector<int64_t> positions_shape{shape_.max_positions, shape_.d_model};
  if (positions == weights_.tensors.end())
    throw InputError(source + ": " + kPositionsName + " (the position table) is missing");
  if (positions->second.shape != positions_shape)
    throw InputError(source + ": " + kPositionsName + " has shape " + shape_text(positions->second.shape) +
                     ", the model's config gives it " + shape_text(positions_shape));
  layers->positions = positions->second.data;

  const std::vector<Weight>& t = layers->table;
  using S = ParamStack;
  using R = ParamRole;
  using P = ParamPart;
  const auto make = [&](S stack, int64_t layer, R role) {
    const Weight* w = find_weight(t, stack, layer, role, P::kWeight);
    // ff1's bias is added by the ReLU kernel that follows it.
    const float* bias = role == R::kFf1 ? nullptr : data_of(t, stack, layer, role, P::kBias);
    const int64_t in = w->shape[0], out = w->shape[1];
    return options_.packed ? ops::PackedLinear(options_.type, w->data, bias, in, out)
                           : ops::PackedLinear::float32_view(w->data, bias, in, out);
  };
  for (int64_t i = 0; i < shape_.encoder_layers; ++i)
    layers->encoder.push_back({make(S::kEncoder, i, R::kSelfQkv), make(S::kEncoder, i, R::kSelfOut),
                               make(S::kEncoder, i, R::kFf1), make(S::kEncoder, i, R::kFf2)});
  for (int64_t i = 0; i < shape_.decoder_layers; ++i)
    layers->decoder.push_back({make(S::kDecoder, i, R::kSelfQkv), make(S::kDecoder, i, R::kSelfOut),
                               make(S::kDecoder, i, R::kCrossQ), make(S::kDecoder, i, R::kCrossKv),
                               make(S::kDecoder, i, R::kCrossOut), make(S::kDecoder, i, R::kFf1),
                               make(S::kDecoder, i, R::kFf2)});
  // The output projection: its own weight or the embedding it is tied to,
  // [V, C]; the step reads it as [C, V].
  const Weight* table_entry = find_weight(t, S::kOutput, -1, R::kOutProj, P::kWeight);
  const float* out_bias = data_of(t, S::kOutput, -1, R::kOutProj, P::kBias);
  const int64_t vocab = table_entry->shape[0], c = table_entry->shape[1];
  std::vector<float> transposed(static_cast<size_t>(vocab * c));  // [C, V]
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t k = 0; k < c; ++k) transposed[static_cast<size_t>(k * vocab + v)] = table_entry->data[v * c + k];
  if (options_.packed) {
    layers->output = ops::PackedLinear(options_.type, transposed.data(), out_bias, c, vocab);
  } else {
    output_t_ = std::move(transposed);
    layers->output = ops::PackedLinear::float32_view(output_t_.data(), out_bias, c, vocab);
  }

  layers->encoder_layers.assign(layers->encoder.size(), EncoderLayerCpu{});
  for (size_t i = 0; i < layers->encoder.size(); ++i) {
    EncoderLayerCpu& l = layers->encoder_layers[i];
    const Layers::Encoder& e = layers->encoder[i];
    l.qkv = &e.qkv, l.out = &e.out, l.ff1 = &e.ff1, l.ff2 = &e.ff2;
  }
  place_norms(t, S::kEncoder, layers->encoder_layers, layers->enc_norm1_w, layers->enc_norm1_b, shape_.post_norm);
  layers->decoder_layers.assign(layers->decoder.size(), DecoderStepLayer{});
  for (size_t i = 0; i < layers->decoder.size(); ++i) {
    DecoderStepLayer& d = layers->decoder_layers[i];
    const Layers::Decoder& l = layers->decoder[i];
    d.qkv = &l.qkv, d.self_out = &l.self_out, d.q = &l.q, d.cross_out = &l.cross_out, d.ff1 = &l.ff1, d.ff2 = &l.ff2;
  }
  place_norms(t, S::kDecoder, layers->decoder_layers, layers->dec_norm1_w, layers->dec_norm1_b, shape_.post_norm);
  layers->src_embedding = data_of(t, S::kEncoder, -1, R::kEmbedding, P::kWeight);
  layers->tgt_embedding = data_of(t, S::kDecoder, -1, R::kEmbedding, P::kWeight);
  layers_ = std::move(layers);
}

void CpuModel::encode(const int64_t* tokens, const int64_t* lengths, int64_t batch, int64_t length, float* memory,
                      const std::vector<float*>* self_probs) const {
  const int64_t c = shape_.d_model, vocab = shape_.src_vocab;
  if (length > shape_.max_positions)
    throw std::invalid_argument("encode: a sequence of " + std::to_string(length) +
                                " tokens exceeds model.max_positions " + std::to_string(shape_.max_positions));
  for (int64_t i = 0; i < batch * length; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      throw std::invalid_argument("encode: token " + std::to_string(tokens[i]) + " is outside the vocabulary of " +
                                  std::to_string(vocab));
  EncoderCpuParams p;
  p.batch = batch, p.length = length, p.channels = c, p.heads = shape_.heads, p.ff_dim = shape_.ff_dim;
  p.vocab = vocab, p.tokens = tokens, p.src_lengths = lengths;
  p.position_table = layers_->positions;
  p.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(c)));
  p.eps = shape_.norm_eps;
  p.post_norm = shape_.post_norm;
  p.naive_attention = options_.naive_attention || self_probs != nullptr;
  p.layers = layers_->encoder_layers;
  p.norm1_w = layers_->enc_norm1_w, p.norm1_b = layers_->enc_norm1_b;
  p.embedding = layers_->src_embedding;
  if (self_probs != nullptr) p.self_probs = *self_probs;
  std::vector<float> workspace(
      static_cast<size_t>(encoder_cpu_workspace_floats(batch, length, c, p.heads, p.ff_dim, p.naive_attention)));
  p.workspace = workspace.data();
  p.memory = memory;
  encoder_cpu(p);
}

void CpuModel::cross_kv(int64_t layer, const float* rows, int64_t n, float* kv) const {
  layers_->decoder[static_cast<size_t>(layer)].cross_kv.forward(rows, n, shape_.d_model, kv);
}

DecoderStepParams CpuModel::step_params() const {
  DecoderStepParams p{};
  p.channels = shape_.d_model, p.heads = shape_.heads, p.ff_dim = shape_.ff_dim, p.vocab = shape_.tgt_vocab;
  p.embedding = layers_->tgt_embedding;
  p.position_table = layers_->positions;
  p.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(shape_.d_model)));
  p.eps = shape_.norm_eps;
  p.post_norm = shape_.post_norm;
  p.norm1_w = layers_->dec_norm1_w, p.norm1_b = layers_->dec_norm1_b;
  p.layers = layers_->decoder_layers;
  p.output = &layers_->output;
  p.naive_attention = options_.naive_attention;
  return p;
}

std::string CpuModel::description() const {
  return std::string(ops::compute_type_name(options_.type)) + (options_.packed ? "" : " (views of the weights)") +
         ", " + (options_.naive_attention ? "naive" : "flash") + " attention";
}

}  // namespace nmt::runtime
