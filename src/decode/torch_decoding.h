// The LibTorch model as a runtime DecodingModel (runtime/decoding_model.h):
// decoding on a GPU, and with LibTorch's own attention (`--attention torch`,
// the reference), op by op (DecoderLayerImpl::forward_step) with cached
// keys and values, through the one search of runtime/search.h; scoring and
// attention maps by the teacher-forced forward pass. And what the nmt
// program lends the runtime (install_torch_runtime), and the runtime's
// engine around a model in training (validation).
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "model/transformer.h"
#include "runtime/cpu_model.h"
#include "runtime/decoding_model.h"
#include "runtime/engine.h"

namespace nmt {

class Tokenizer;

class TorchDecodingModel final : public runtime::DecodingModel {
 public:
  // model: built and loaded, on `device`, in eval mode.
  TorchDecodingModel(Transformer model, c10::Device device, std::string description);

  const ModelShape& shape() const override { return shape_; }
  std::unique_ptr<runtime::DecoderState> new_state() const override;
  // One search at a time: a GPU runs one batch at once, and LibTorch's
  // thread settings are the process's.
  bool parallel_searches() const override { return false; }
  void use_threads(int threads) const override;
  std::vector<std::vector<double>> score(const std::vector<std::vector<int64_t>>& sources,
                                         const std::vector<std::vector<int64_t>>& targets) const override;
  runtime::AttentionMaps attention(const std::vector<int64_t>& src, const std::vector<int64_t>& hyp) const override;
  std::string description() const override { return description_; }

 private:
  mutable Transformer model_;  // decoding does not change it; LibTorch's calls are not const
  c10::Device device_;
  ModelShape shape_;
  std::string description_;
};

// The model's weights as the runtime reads them: float32 views of its
// parameters and position table where they lie (on the CPU, contiguous,
// float32: InputError otherwise), kept alive by `storage` when given.
runtime::WeightSet weight_views(const Transformer& model, std::shared_ptr<const void> storage = nullptr);

// Lends the runtime LibTorch (runtime/translator_impl.h's TorchSupport): GPUs,
// LibTorch's attention, model.pt of checkpoints saved before
// model.safetensors. The nmt program calls it first thing.
void install_torch_runtime();

// The runtime's engine around a model being trained (validation): on the
// CPU with its own attention kernels, the runtime's CPU model on views of
// the parameters as they are now (made anew for each evaluation, as the
// weights change); elsewhere, the LibTorch model itself. The tokenizers
// must outlive the engine.
std::unique_ptr<runtime::Engine> training_engine(Transformer model, const c10::Device& device,
                                                 const Tokenizer& source, const Tokenizer& target,
                                                 const DecodeOptions& defaults, int threads);

}  // namespace nmt
