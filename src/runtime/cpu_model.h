// The Transformer for translation on the CPU, without LibTorch: its weights
// by name (model/weight_names.h), the dense layers packed once in the
// compute type decoding runs in (ops/linear/packed_linear.h), and the three
// things a search asks of it: encode sentences (runtime/encoder_cpu.h),
// project their encoder output into each decoder layer's cross-attention
// keys and values, and one decoder step (runtime/decoder_step_cpu.h).
// Attention, LayerNorm and the residual stream stay float32 in every
// compute type. A CpuModel is read-only once made: searches on several
// threads share one (each keeps its own caches, runtime/cpu_decoder_state.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/weight_names.h"
#include "ops/linear/packed_linear.h"
#include "runtime/decoder_step_cpu.h"
#include "runtime/safetensors.h"

namespace nmt::runtime {

// A model's float32 tensors by name (every weight_specs entry, and the
// position table, kPositionsName), and what keeps their memory alive (null:
// the caller's, which outlives the model: a model in training).
struct WeightSet {
  std::map<std::string, TensorView> tensors;
  std::shared_ptr<const void> storage;
};

struct CpuModelOptions {
  ops::ComputeType type = ops::ComputeType::kFloat32;  // the dense layers' arithmetic
  bool naive_attention = false;  // the naive attention kernel (else flash)
  // false: float32 views of the weights where they lie, no packed copies
  // (validation of a model in training, whose weights change between calls;
  // the same results, a little slower at few rows). type must be float32.
  bool packed = true;
};

class CpuModel {
 public:
  // InputError naming `source` (the file the weights came from) and the
  // weight when one is missing or has another shape than `shape` gives it.
  CpuModel(const ModelShape& shape, WeightSet weights, const CpuModelOptions& options, const std::string& source);

  const ModelShape& shape() const { return shape_; }
  const CpuModelOptions& options() const { return options_; }

  // tokens: [B, S] (padded; ids within the source vocabulary), lengths: [B]
  // -> memory: [B, S, C], the encoder's output after its final norm, zeros
  // past each sentence's length. Each sentence's rows are the same bits
  // whatever else is in the batch. self_probs (optional, B = 1): per encoder
  // layer a [H, S, S] buffer that gets the self-attention probabilities
  // (computed by the naive kernel for it).
  void encode(const int64_t* tokens, const int64_t* lengths, int64_t batch, int64_t length, float* memory,
              const std::vector<float*>* self_probs = nullptr) const;

  // Decoder layer `layer`'s cross-attention keys and values of encoder
  // output rows: rows: [n, C] -> kv: [n, 2C] (keys in [0, C), values in [C, 2C)).
  void cross_kv(int64_t layer, const float* rows, int64_t n, float* kv) const;

  // A decoder step's parameters with this model's weights filled in (the
  // caller fills rows, tokens, positions, caches, workspace, logits).
  DecoderStepParams step_params() const;

  // The target embedding [V, C]: a step feeds ids below V only.
  int64_t target_vocab() const { return shape_.tgt_vocab; }
  // "float32", "int8, output int8", ...
  std::string description() const;

 private:
  struct Layers;
  ModelShape shape_;
  CpuModelOptions options_;
  WeightSet weights_;
  std::vector<float> output_t_;  // views: the output projection [C, V] (the packed ones transpose as they pack)
  std::shared_ptr<const Layers> layers_;
};

}  // namespace nmt::runtime
