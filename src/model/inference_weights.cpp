#include "model/inference_weights.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace nmt {

ops::ComputeType output_compute_type(ops::ComputeType type) { return type; }

namespace {

// Where a dense layer of (stack, role) goes; nullptr for none.
ops::PackedLinear* slot(InferenceWeights& w, const ParamEntry& e) {
  const auto i = static_cast<size_t>(e.layer);
  if (e.stack == ParamStack::kEncoder && e.layer >= 0 && i < w.encoder.size()) {
    EncoderLayerWeights& l = w.encoder[i];
    switch (e.role) {
      case ParamRole::kSelfQkv: return &l.qkv;
      case ParamRole::kSelfOut: return &l.out;
      case ParamRole::kFf1: return &l.ff1;
      case ParamRole::kFf2: return &l.ff2;
      default: return nullptr;
    }
  }
  if (e.stack == ParamStack::kDecoder && e.layer >= 0 && i < w.decoder.size()) {
    DecoderLayerWeights& l = w.decoder[i];
    switch (e.role) {
      case ParamRole::kSelfQkv: return &l.qkv;
      case ParamRole::kSelfOut: return &l.self_out;
      case ParamRole::kCrossQ: return &l.q;
      case ParamRole::kCrossKv: return &l.cross_kv;
      case ParamRole::kCrossOut: return &l.cross_out;
      case ParamRole::kFf1: return &l.ff1;
      case ParamRole::kFf2: return &l.ff2;
      default: return nullptr;
    }
  }
  return nullptr;
}

const float* float_data(const ParamEntry& e) {
  if (!e.tensor.device().is_cpu() || e.tensor.scalar_type() != at::kFloat || !e.tensor.is_contiguous())
    throw std::invalid_argument("packing " + e.name + " for decoding: expected contiguous float32 on the CPU");
  return e.tensor.data_ptr<float>();
}

}  // namespace

namespace {

// The layers of `table`, each made by make(weight [in, out], bias or
// nullptr, in, out); the output projection is left to the caller.
template <typename Make>
InferenceWeights dense_layers(const std::vector<ParamEntry>& table, const Make& make) {
  InferenceWeights w;
  int64_t encoder_layers = 0, decoder_layers = 0;
  for (const ParamEntry& e : table) {
    if (e.stack == ParamStack::kEncoder) encoder_layers = std::max(encoder_layers, e.layer + 1);
    if (e.stack == ParamStack::kDecoder) decoder_layers = std::max(decoder_layers, e.layer + 1);
  }
  w.encoder.resize(static_cast<size_t>(encoder_layers));
  w.decoder.resize(static_cast<size_t>(decoder_layers));
  for (const ParamEntry& e : table) {
    if (w.packed_from == nullptr) w.packed_from = e.tensor.data_ptr();
    if (!is_dense(e.role) || e.part != ParamPart::kWeight) continue;
    ops::PackedLinear* s = slot(w, e);
    if (s == nullptr) continue;
    const ParamEntry* bias = find_param(table, e.stack, e.layer, e.role, ParamPart::kBias);
    // ff1's bias is added by the ReLU kernel that follows it.
    const float* b = bias && e.role != ParamRole::kFf1 ? float_data(*bias) : nullptr;
    *s = make(float_data(e), b, e.tensor.size(0), e.tensor.size(1));
  }
  return w;
}

}  // namespace

InferenceWeights float32_views(const std::vector<ParamEntry>& table) {
  return dense_layers(table, &ops::PackedLinear::float32_view);
}

InferenceWeights pack_inference_weights(const std::vector<ParamEntry>& table, ops::ComputeType type,
                                        ops::ComputeType output_type) {
  InferenceWeights w = dense_layers(table, [type](const float* weight, const float* bias, int64_t in, int64_t out) {
    return ops::PackedLinear(type, weight, bias, in, out);
  });
  w.type = type, w.output_type = output_type;
  // The output projection: its own weight, or the embedding it is tied to
  // (the table resolves either), [V, C]; the layers read it as [C, V].
  const ParamEntry* table_entry = find_param(table, ParamStack::kOutput, -1, ParamRole::kOutProj, ParamPart::kWeight);
  const ParamEntry* out_bias = find_param(table, ParamStack::kOutput, -1, ParamRole::kOutProj, ParamPart::kBias);
  if (table_entry == nullptr) throw std::invalid_argument("packing for decoding: the model has no output projection");
  const float* t = float_data(*table_entry);
  const int64_t vocab = table_entry->tensor.size(0), c = table_entry->tensor.size(1);
  std::vector<float> transposed(static_cast<size_t>(vocab * c));  // [C, V]
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t k = 0; k < c; ++k) transposed[static_cast<size_t>(k * vocab + v)] = t[v * c + k];
  w.output = ops::PackedLinear(output_type, transposed.data(), out_bias ? float_data(*out_bias) : nullptr, c, vocab);
  return w;
}

}  // namespace nmt
