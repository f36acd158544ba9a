// Every weight of the Transformer, named once (as llm.c's parameter table),
// from the model's shape alone: where it sits (stack, layer), what it is
// (role, weight or bias), its name (the module path, which model.pt and
// model.safetensors use) and its shape. No LibTorch here: the runtime reads a
// checkpoint's weights by these names (runtime/cpu_model.h), and the
// LibTorch model's parameter table (model/parameter_table.h) attaches its
// tensors to the same entries, so the two can never name a weight apart.
//
// A tied weight (model.tie_embeddings, model.tie_all) is one entry, named
// once, that lists its further uses: find_weight finds it by any of them, so
// a reader asks for the use it needs (the decoder's embedding, the output
// projection) and never for how the model ties it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

struct ModelConfig;

// What the weights and the computation of a model depend on.
struct ModelShape {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int64_t d_model = 0;         // C
  int64_t heads = 0;           // H
  int64_t encoder_layers = 0, decoder_layers = 0;
  int64_t ff_dim = 0;          // F
  int64_t max_positions = 0;   // rows of the sinusoidal table
  bool post_norm = false;      // LayerNorm after each residual add (else before each sublayer, and final norms)
  bool tie_embeddings = true;  // the output projection is the target embedding
  bool tie_all = false;        // the source embedding too
  double norm_eps = 1e-5;      // every LayerNorm's epsilon (LibTorch's default)
};
// A config's model for the given vocabulary sizes.
ModelShape model_shape(const ModelConfig& model, int64_t src_vocab, int64_t tgt_vocab);

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

struct WeightSpec {
  std::string name;     // the module path, e.g. "decoder_layers.1.cross_attn.kv.weight"
  ParamStack stack;     // (stack, layer, role): the first use, which the name is after
  int64_t layer;        // -1 for the stack's own (embedding, final norm, output projection)
  ParamRole role;
  ParamPart part;
  std::vector<int64_t> shape;
  std::vector<ParamUse> tied;  // the same tensor's other uses (tied weights)
};

// In the LibTorch module's named_parameters order (its own, then its
// submodules' in the order they are registered).
std::vector<WeightSpec> weight_specs(const ModelShape& shape);

// The entry of (stack, layer, role, part) among `specs` (WeightSpec or
// anything with its fields), its first use or a tied one; nullptr if absent.
template <typename Entry>
const Entry* find_weight(const std::vector<Entry>& specs, ParamStack stack, int64_t layer, ParamRole role,
                         ParamPart part) {
  for (const Entry& e : specs) {
    if (e.part != part) continue;
    if (e.stack == stack && e.layer == layer && e.role == role) return &e;
    for (const ParamUse& u : e.tied)
      if (u.stack == stack && u.layer == layer && u.role == role) return &e;
  }
  return nullptr;
}

// The sinusoidal position table [max_positions, C], a buffer of the model
// (not a parameter): saved beside the weights under this name, so that a
// reader uses the table the model was trained with to the bit.
inline constexpr const char* kPositionsName = "positions";

}  // namespace nmt
