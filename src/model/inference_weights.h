// The dense layers decoding reads on the CPU, packed once in the compute
// type chosen for decoding (--compute-type, ops/linear/packed_linear.h), by
// role from the parameter table. TransformerImpl::prepare_decoding makes
// them; the fused encoder (model/encoder_cpu.h), the cross-attention
// keys/values and the fused decoder step (model/decoder_step_cpu.h) read
// them. They are copies in every type (float32 in rows_matmul's panels), so
// a model whose weights change afterwards (training) must be prepared again;
// float32_views() instead points at the parameters as they are.
#pragma once

#include <cstdint>
#include <vector>

#include "model/parameter_table.h"
#include "ops/linear/packed_linear.h"

namespace nmt {

struct EncoderLayerWeights {
  ops::PackedLinear qkv, out, ff1, ff2;  // ff1 without its bias (fused with the ReLU)
};

struct DecoderLayerWeights {
  ops::PackedLinear qkv, self_out, q, cross_kv, cross_out, ff1, ff2;
};

struct InferenceWeights {
  ops::ComputeType type = ops::ComputeType::kFloat32;         // the layers'
  ops::ComputeType output_type = ops::ComputeType::kFloat32;  // the output projection's
  std::vector<EncoderLayerWeights> encoder;
  std::vector<DecoderLayerWeights> decoder;
  ops::PackedLinear output;         // C -> V, with the output bias of an untied model
  const void* packed_from = nullptr;  // the first parameter's data when packed (a moved model must repack)
};

// Which compute type the output projection gets when the layers get `type`:
// the same. Measured with int8 layers on configs/real.yaml (2 threads, real
// test split): an int8 output projection decoded greedy batch 32 at 1,845
// sentences/s against 1,621 in bf16 and 1,239 in float32, with BLEU 27.01,
// 27.13 and 27.05 (float32 throughout: 27.04); docs/bench/decode_peers.md.
// The embedding stays float32 in every type: a lookup of one row per token
// has no arithmetic to save.
ops::ComputeType output_compute_type(ops::ComputeType type);

// table: parameter_table(model), float32 on the CPU. Throws std::invalid_argument otherwise.
InferenceWeights pack_inference_weights(const std::vector<ParamEntry>& table, ops::ComputeType type,
                                        ops::ComputeType output_type);

// The layers as float32 views of the parameters (PackedLinear::float32_view:
// no copy, so they follow the weights as training changes them), without
// the output projection (the caller has it transposed already).
InferenceWeights float32_views(const std::vector<ParamEntry>& table);

}  // namespace nmt
