// Every weight of the Transformer, named once (as llm.c's parameter table):
// where it sits (stack, layer), what it is (role, weight or bias), its name
// (the module path, which the checkpoint's model.pt uses) and its tensor.
// The readers that need to know the architecture's weights one by one take
// them from here: the fused CPU decoding step (model/transformer.cpp), the
// CTranslate2 exporter (export/) and the checkpoint's shape check
// (checkpoint/). A parameter the table lacks fails model_test
// (ParameterTable.*), not a reader.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

class TransformerImpl;

enum class ParamStack { kEncoder, kDecoder, kOutput };

// What a tensor is. Dense weights are [in, out]; LayerNorm's weight is its
// gain (CTranslate2's gamma), its bias the shift (beta).
enum class ParamRole {
  kEmbedding,  // [V, C] (per stack: source or target table)
  kNorm1,      // before self-attention
  kSelfQkv,    // [C, 3C]: q | k | v
  kSelfOut,    // [C, C]
  kNorm2,      // decoder: before cross-attention; encoder: before the feed-forward block
  kCrossQ,     // [C, C]
  kCrossKv,    // [C, 2C]: k | v of the encoder output
  kCrossOut,   // [C, C]
  kNorm3,      // decoder: before the feed-forward block
  kFf1,        // [C, F]
  kFf2,        // [F, C]
  kFinalNorm,  // the stack's last LayerNorm
  kOutProj,    // [V, C] output projection (untied models only; tied ones use the target embedding)
};

enum class ParamPart { kWeight, kBias };

// Roles held by a Dense layer (weight [in, out], bias [out]).
bool is_dense(ParamRole role);

struct ParamEntry {
  std::string name;     // the module path, e.g. "decoder_layers.1.cross_attn.kv.weight"
  ParamStack stack;
  int64_t layer;        // -1 for the stack's own (embedding, final norm, output projection)
  ParamRole role;
  ParamPart part;
  at::Tensor tensor;    // the parameter itself (not a copy)
};

// In named_parameters' order (the model's own, then its submodules' in the
// order they were registered).
std::vector<ParamEntry> parameter_table(const TransformerImpl& model);

// The entry of (stack, layer, role, part) in `table`; nullptr if absent.
const ParamEntry* find_param(const std::vector<ParamEntry>& table, ParamStack stack, int64_t layer, ParamRole role,
                             ParamPart part);

}  // namespace nmt
