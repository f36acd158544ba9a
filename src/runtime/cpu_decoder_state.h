// The slots of a running batch on the CPU (runtime/decoder_state.h) for a
// CpuModel: per decoder layer, self-attention keys/values [rows, positions,
// 2C] and encoder keys/values [rows, S, 2C], float32 in plain vectors, and
// the step's scratch. One per search; the model is shared.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/cpu_model.h"
#include "runtime/decoder_state.h"

namespace nmt::runtime {

class CpuDecoderState final : public DecoderState {
 public:
  explicit CpuDecoderState(std::shared_ptr<const CpuModel> model);

  void resize(int64_t rows, int64_t positions, int64_t src, int64_t rows_in_use, int64_t cross_in_use) override;
  int64_t rows() const override { return rows_; }
  int64_t positions() const override { return positions_; }
  int64_t source_positions() const override { return src_; }
  void add_sources(const std::vector<std::vector<int64_t>>& sources, const std::vector<int64_t>& cross_slots) override;
  float* step(int64_t n, const int64_t* tokens, const int64_t* positions, const int64_t* cross_rows,
              const int64_t* src_lengths) override;
  void copy_row(int64_t to, int64_t from, int64_t positions) override;
  void release() override;
  int64_t vocab() const override { return model_->shape().tgt_vocab; }

  // A step of one row (slot 0, cross slot 0, src_len keys) at `position`,
  // with the naive kernel, which leaves each decoder layer's probabilities
  // in self_probs[l] ([H, position + 1]) and cross_probs[l] ([H, src_len]):
  // the attention maps of a translation.
  void step_recording(int64_t token, int64_t position, int64_t src_len, std::vector<std::vector<float>>& self_probs,
                      std::vector<std::vector<float>>& cross_probs);

 private:
  // A step's parameters for rows [0, n), the workspace and logits sized for them.
  DecoderStepParams params(int64_t n, const int64_t* tokens, const int64_t* positions, const int64_t* cross_rows,
                           const int64_t* src_lengths);

  std::shared_ptr<const CpuModel> model_;
  int64_t rows_ = 0, positions_ = 0, src_ = 0;
  // Per decoder layer: self_kv [rows_, positions_, 2C], cross_kv [rows_, src_, 2C].
  std::vector<std::vector<float>> self_kv_, cross_kv_;
  std::vector<float> workspace_, logits_;
  std::vector<int64_t> key_lengths_;
};

}  // namespace nmt::runtime
