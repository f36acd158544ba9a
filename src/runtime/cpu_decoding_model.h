// The runtime's model on the CPU as a DecodingModel: searches on
// CpuDecoderState slots, scoring and attention maps by the same decoder
// steps (teacher forcing, one token a step), no LibTorch.
#pragma once

#include <memory>

#include "runtime/cpu_model.h"
#include "runtime/decoding_model.h"

namespace nmt::runtime {

class CpuDecodingModel final : public DecodingModel {
 public:
  explicit CpuDecodingModel(std::shared_ptr<const CpuModel> model);

  const ModelShape& shape() const override { return model_->shape(); }
  std::unique_ptr<DecoderState> new_state() const override;
  bool parallel_searches() const override { return true; }
  void use_threads(int threads) const override;
  std::vector<std::vector<double>> score(const std::vector<std::vector<int64_t>>& sources,
                                         const std::vector<std::vector<int64_t>>& targets) const override;
  AttentionMaps attention(const std::vector<int64_t>& src, const std::vector<int64_t>& hyp) const override;
  std::string description() const override;

  const CpuModel& model() const { return *model_; }

 private:
  std::shared_ptr<const CpuModel> model_;
};

}  // namespace nmt::runtime
