// The runtime's models of a LibTorch model, for tests that compare them:
// the CPU runtime on the model's weights (packed in a compute type, or as
// views), the LibTorch model as the runtime drives it (a GPU's path, and the
// torch attention backend), and a reference state that recomputes every
// row's whole prefix with the teacher-forced forward pass: no cache to get
// wrong, so a search on it checks the caches' bookkeeping of the others.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "data/dataset.h"
#include "decode/torch_decoding.h"
#include "model/parameter_table.h"
#include "runtime/cpu_decoding_model.h"
#include "runtime/search.h"
#include "tokenizer/special_ids.h"

namespace nmt::testing {

// The CPU runtime on `model`'s weights (which must outlive it).
inline std::shared_ptr<const runtime::CpuDecodingModel> cpu_model(const Transformer& model,
                                                                 ops::ComputeType type = ops::ComputeType::kFloat32,
                                                                 bool naive = false, bool packed = true) {
  runtime::CpuModelOptions o;
  o.type = type, o.naive_attention = naive, o.packed = packed;
  return std::make_shared<runtime::CpuDecodingModel>(
      std::make_shared<const runtime::CpuModel>(model_shape(*model), weight_views(model), o, "the test's model"));
}

// The LibTorch model with `backend`'s attention, on the CPU.
inline std::shared_ptr<const TorchDecodingModel> torch_model(Transformer model, ops::AttentionBackend backend) {
  model->set_attention_backend(backend);
  return std::make_shared<TorchDecodingModel>(model, torch::kCPU, "LibTorch (test)");
}

// Rows of token prefixes; every step recomputes them all (decode_embedded).
class RecomputingState final : public runtime::DecoderState {
 public:
  explicit RecomputingState(Transformer model) : model_(std::move(model)) {}
  void resize(int64_t rows, int64_t positions, int64_t src, int64_t, int64_t) override {
    rows_ = std::max(rows, rows_), positions_ = std::max(positions, positions_), src_ = std::max(src, src_);
    prefix_.resize(static_cast<size_t>(rows_));
    sources_.resize(static_cast<size_t>(rows_));
  }
  int64_t rows() const override { return rows_; }
  int64_t positions() const override { return positions_; }
  int64_t source_positions() const override { return src_; }
  void add_sources(const std::vector<std::vector<int64_t>>& sources, const std::vector<int64_t>& slots) override {
    for (size_t i = 0; i < sources.size(); ++i) sources_[static_cast<size_t>(slots[i])] = sources[i];
  }
  float* step(int64_t n, const int64_t* tokens, const int64_t* positions, const int64_t* cross_rows,
              const int64_t*) override {
    torch::NoGradGuard no_grad;
    const int64_t v = vocab();
    // Every row's whole prefix through the teacher-forced pass, as one
    // padded batch (causal: a row's last position reads nothing after it).
    std::vector<std::vector<int64_t>> srcs;
    std::vector<int64_t> lengths;
    int64_t longest = 0;
    for (int64_t r = 0; r < n; ++r) {
      std::vector<int64_t>& p = prefix_[static_cast<size_t>(r)];
      p.resize(static_cast<size_t>(positions[r]));
      p.push_back(tokens[r]);
      srcs.push_back(sources_[static_cast<size_t>(cross_rows[r])]);
      lengths.push_back(static_cast<int64_t>(p.size()));
      longest = std::max(longest, lengths.back());
    }
    torch::Tensor tgt = torch::zeros({n, longest}, torch::kLong);
    for (int64_t r = 0; r < n; ++r)
      tgt[r].narrow(0, 0, lengths[r]).copy_(torch::tensor(prefix_[static_cast<size_t>(r)], torch::kLong));
    auto [src, len] = make_source_batch(srcs);
    const torch::Tensor tgt_len = torch::tensor(lengths, torch::kLong);
    const torch::Tensor out = model_->decode_embedded(model_->embed_target(tgt), model_->encode(src, len), tgt_len, len)
                                  .gather(1, (tgt_len - 1).view({n, 1, 1}).expand({n, 1, v}))
                                  .squeeze(1)
                                  .to(torch::kFloat)
                                  .contiguous();  // [n, V]
    logits_.assign(out.data_ptr<float>(), out.data_ptr<float>() + n * v);
    return logits_.data();
  }
  void copy_row(int64_t to, int64_t from, int64_t positions) override {
    prefix_[static_cast<size_t>(to)].assign(prefix_[static_cast<size_t>(from)].begin(),
                                            prefix_[static_cast<size_t>(from)].begin() + positions);
  }
  void release() override { prefix_.clear(), sources_.clear(), rows_ = positions_ = src_ = 0; }
  int64_t vocab() const override { return model_->options().tgt_vocab(); }

 private:
  Transformer model_;
  int64_t rows_ = 0, positions_ = 0, src_ = 0;
  std::vector<std::vector<int64_t>> prefix_, sources_;
  std::vector<float> logits_;
};

// Every source decoded by one search on `state` (all joining at once), as a
// fixed batch: empty sources give empty outputs. owed: empty, or per source.
inline std::vector<std::vector<int64_t>> search_all(std::unique_ptr<runtime::DecoderState> state,
                                                    const std::vector<std::vector<int64_t>>& sources,
                                                    const DecodeOptions& options, int64_t max_positions,
                                                    const std::vector<std::vector<int64_t>>& owed = {}) {
  runtime::Search search(std::move(state), options, max_positions);
  std::vector<std::vector<int64_t>> todo, todo_owed;
  std::vector<uint64_t> tickets;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty()) continue;
    todo.push_back(sources[i]), tickets.push_back(i);
    if (!owed.empty()) todo_owed.push_back(owed[i]);
  }
  std::vector<std::vector<int64_t>> out(sources.size());
  search.add(todo, tickets, todo_owed);
  while (search.rows() > 0)
    for (auto& [ticket, ids] : search.step()) out[ticket] = std::move(ids);
  return out;
}

inline std::vector<std::vector<int64_t>> search_all(const runtime::DecodingModel& model,
                                                    const std::vector<std::vector<int64_t>>& sources,
                                                    const DecodeOptions& options,
                                                    const std::vector<std::vector<int64_t>>& owed = {}) {
  return search_all(model.new_state(), sources, options, model.shape().max_positions, owed);
}

}  // namespace nmt::testing
