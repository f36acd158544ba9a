#include "runtime/cpu_decoding_model.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/cpu_decoder_state.h"
#include "tokenizer/special_ids.h"
#include "util/cpu_features.h"

namespace nmt::runtime {

namespace {

// log_softmax(row)[label] in double (the row is float32 logits).
double log_prob(const float* row, int64_t vocab, int64_t label) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t v = 0; v < vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
  return (static_cast<double>(row[label]) - max) - std::log(sum);
}

}  // namespace

CpuDecodingModel::CpuDecodingModel(std::shared_ptr<const CpuModel> model) : model_(std::move(model)) {}

std::unique_ptr<DecoderState> CpuDecodingModel::new_state() const {
  return std::make_unique<CpuDecoderState>(model_);
}

void CpuDecodingModel::use_threads(int threads) const { omp_set_num_threads(std::max(1, threads)); }

std::vector<std::vector<double>> CpuDecodingModel::score(const std::vector<std::vector<int64_t>>& sources,
                                                         const std::vector<std::vector<int64_t>>& targets) const {
  const int64_t batch = static_cast<int64_t>(sources.size());
  std::vector<std::vector<double>> out(static_cast<size_t>(batch));
  if (batch == 0) return out;
  // An empty source still needs one key to attend to: <end> stands in.
  std::vector<std::vector<int64_t>> src(sources);
  int64_t s = 1, t = 1;
  for (int64_t b = 0; b < batch; ++b) {
    if (src[static_cast<size_t>(b)].empty()) src[static_cast<size_t>(b)] = {kEndId};
    s = std::max<int64_t>(s, static_cast<int64_t>(src[static_cast<size_t>(b)].size()));
    t = std::max<int64_t>(t, static_cast<int64_t>(targets[static_cast<size_t>(b)].size()) + 1);
  }
  // Teacher forcing, a token a step: step k feeds <start> y1 .. yn's k-th
  // token to every row at position k and reads the logits of its label
  // (y_{k+1}, or <end> after the last); rows past their end feed padding.
  CpuDecoderState state(model_);
  state.resize(batch, t, s, 0, 0);
  std::vector<int64_t> slots(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) slots[static_cast<size_t>(b)] = b;
  state.add_sources(src, slots);
  std::vector<int64_t> tokens(static_cast<size_t>(batch)), positions(static_cast<size_t>(batch)),
      src_lengths(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) src_lengths[static_cast<size_t>(b)] = static_cast<int64_t>(src[static_cast<size_t>(b)].size());
  const int64_t vocab = model_->shape().tgt_vocab;
  for (int64_t k = 0; k < t; ++k) {
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<int64_t>& y = targets[static_cast<size_t>(b)];
      const int64_t n = static_cast<int64_t>(y.size());
      tokens[static_cast<size_t>(b)] = k == 0 ? kStartId : (k <= n ? y[static_cast<size_t>(k - 1)] : kPadId);
      positions[static_cast<size_t>(b)] = k;
    }
    const float* logits = state.step(batch, tokens.data(), positions.data(), slots.data(), src_lengths.data());
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<int64_t>& y = targets[static_cast<size_t>(b)];
      const int64_t n = static_cast<int64_t>(y.size());
      if (k > n) continue;
      out[static_cast<size_t>(b)].push_back(log_prob(logits + b * vocab, vocab, k < n ? y[static_cast<size_t>(k)] : kEndId));
    }
  }
  return out;
}

AttentionMaps CpuDecodingModel::attention(const std::vector<int64_t>& src, const std::vector<int64_t>& hyp) const {
  const ModelShape& m = model_->shape();
  const int64_t s = static_cast<int64_t>(src.size()), t = static_cast<int64_t>(hyp.size()) + 1, h = m.heads;
  AttentionMaps maps;
  if (s == 0) return maps;
  const auto make = [&](int64_t rows, int64_t cols) {
    AttentionMap a;
    a.heads = h, a.rows = rows, a.cols = cols;
    a.values.assign(static_cast<size_t>(h * rows * cols), 0.0f);
    return a;
  };
  // The encoder, recording each layer's self-attention (the naive kernel computes the probabilities).
  std::vector<float*> self_probs;
  for (int64_t l = 0; l < m.encoder_layers; ++l) maps.encoder_self.push_back(make(s, s));
  for (AttentionMap& a : maps.encoder_self) self_probs.push_back(a.values.data());
  const int64_t length = s;
  std::vector<float> memory(static_cast<size_t>(s * m.d_model));
  model_->encode(src.data(), &length, 1, s, memory.data(), &self_probs);
  // The decoder, a step per token of <start> hyp, each layer recording its
  // self-attention over the positions so far and its cross-attention.
  CpuDecoderState state(model_);
  state.resize(1, t, s, 0, 0);
  state.add_sources({src}, {0});
  for (int64_t l = 0; l < m.decoder_layers; ++l) {
    maps.decoder_self.push_back(make(t, t));
    maps.cross.push_back(make(t, s));
  }
  std::vector<std::vector<float>> self_row(static_cast<size_t>(m.decoder_layers)),
      cross_row(static_cast<size_t>(m.decoder_layers));
  for (int64_t l = 0; l < m.decoder_layers; ++l) {
    self_row[static_cast<size_t>(l)].resize(static_cast<size_t>(h * t));
    cross_row[static_cast<size_t>(l)].resize(static_cast<size_t>(h * s));
  }
  for (int64_t k = 0; k < t; ++k) {
    const int64_t token = k == 0 ? kStartId : hyp[static_cast<size_t>(k - 1)];
    state.step_recording(token, k, s, self_row, cross_row);
    for (int64_t l = 0; l < m.decoder_layers; ++l)
      for (int64_t head = 0; head < h; ++head) {
        AttentionMap& self = maps.decoder_self[static_cast<size_t>(l)];
        AttentionMap& cross = maps.cross[static_cast<size_t>(l)];
        std::copy_n(self_row[static_cast<size_t>(l)].begin() + head * (k + 1), k + 1,
                    self.values.begin() + (head * t + k) * t);
        std::copy_n(cross_row[static_cast<size_t>(l)].begin() + head * s, s,
                    cross.values.begin() + (head * t + k) * s);
      }
  }
  return maps;
}

std::string CpuDecodingModel::description() const {
  return "CPU runtime: " + model_->description() + ", " + isa_name(kernel_isa()) + " kernels";
}

}  // namespace nmt::runtime
