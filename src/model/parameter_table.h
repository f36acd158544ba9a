// Every weight of the Transformer, named once (as llm.c's parameter table):
// where it sits (stack, layer), what it is (role, weight or bias), its name
// (the module path, which the checkpoint's model.pt uses) and its tensor.
// The readers that need to know the architecture's weights one by one take
// them from here: the fused CPU decoding step (model/transformer.cpp), the
// CTranslate2 exporter (export/) and the checkpoint's shape check
// (checkpoint/). A parameter the table lacks fails model_test
// (ParameterTable.*), not a reader.
//
// A tied tensor (model.tie_embeddings, model.tie_all) is one entry, named
// once, that lists its further uses: find_param finds it by any of them, so
// a reader asks for the use it needs (the decoder's embedding, the output
// projection) and never for how the model ties it.
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
  kOutProj,    // [V, C] output projection (its own entry untied; tied: a use of the target embedding's)
};

enum class ParamPart { kWeight, kBias };

// Roles held by a Dense layer (weight [in, out], bias [out]).
bool is_dense(ParamRole role);

// Where a tensor is used: (stack, layer, role) of the same part.
struct ParamUse {
  ParamStack stack;
  int64_t layer;
  ParamRole role;
};

struct ParamEntry {
  std::string name;     // the module path, e.g. "decoder_layers.1.cross_attn.kv.weight"
  ParamStack stack;     // (stack, layer, role): the first use, which the name is after
  int64_t layer;        // -1 for the stack's own (embedding, final norm, output projection)
  ParamRole role;
  ParamPart part;
  at::Tensor tensor;    // the parameter itself (not a copy)
  std::vector<ParamUse> tied;  // the same tensor's other uses (tied weights), in no particular order
};

// In named_parameters' order (the model's own, then its submodules' in the
// order they were registered).
std::vector<ParamEntry> parameter_table(const TransformerImpl& model);

// The entry of (stack, layer, role, part) in `table`, its first use or a
// tied one; nullptr if absent.
const ParamEntry* find_param(const std::vector<ParamEntry>& table, ParamStack stack, int64_t layer, ParamRole role,
                             ParamPart part);

}  // namespace nmt
