// What tests switch and read inside the model and the running batch that the
// product never does, through the classes' test seams (friends), so that no
// test-only method sits in their interfaces. A ModelPathScope restores what a
// test changed on a shared model when it ends, however it ends.
#pragma once

#include <memory>

#include "decode/continuous_search.h"
#include "model/transformer.h"
#include "ops/attention/backend.h"

namespace nmt {

struct TransformerTestSeam {
  // false: decoding steps run op by op even where the fused CPU step applies.
  static void set_fused_decode_step(Transformer& model, bool fused) { model->runtime_.fused_decode_step = fused; }
  // false: training's encoder runs on padded rows even where packed ones apply.
  static void set_packed_encoder(Transformer& model, bool packed) { model->runtime_.packed_encoder = packed; }
  static bool packed_encoder_applies(const Transformer& model, const at::Tensor& src) {
    return model->packed_encoder_applies(src);
  }
  // Drops prepare_decoding's weights: float32, op by op again.
  static void unprepare_decoding(Transformer& model) { model->inference_.reset(); }

  // Which decoding path the model takes: its attention backend, whether the
  // fused step is on, and the packed weights.
  struct Path {
    ops::AttentionBackend backend;
    bool fused;
    std::shared_ptr<const InferenceWeights> inference;
  };
  static Path path(const Transformer& model) {
    return {model->attention_backend(), model->runtime_.fused_decode_step, model->inference_};
  }
  static void set_path(Transformer& model, const Path& path) {
    model->set_attention_backend(path.backend);
    model->runtime_.fused_decode_step = path.fused;
    model->inference_ = path.inference;
  }
};

struct ContinuousSearchTestSeam {
  // Rows the slot tensors have room for (0 before the first add and after release()).
  static int64_t slot_rows(const ContinuousSearch& s) { return s.slots_.empty() ? 0 : s.slots_[0].self_kv.size(0); }
  // Cross slots (one per sentence, given back when it finishes) taken so far.
  static int64_t cross_slots_taken(const ContinuousSearch& s) { return s.cross_slots_used_; }
};

namespace testing {

// The decoding path of a model shared between tests (its attention backend,
// fused step and packed weights) as the scope found it, put back when the
// scope ends.
class ModelPathScope {
 public:
  explicit ModelPathScope(Transformer model) : model_(std::move(model)), saved_(TransformerTestSeam::path(model_)) {}
  ~ModelPathScope() { TransformerTestSeam::set_path(model_, saved_); }
  ModelPathScope(const ModelPathScope&) = delete;
  ModelPathScope& operator=(const ModelPathScope&) = delete;

 private:
  Transformer model_;
  TransformerTestSeam::Path saved_;
};

}  // namespace testing
}  // namespace nmt
