#include "runtime/cpu_decoder_state.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tokenizer/special_ids.h"

namespace nmt::runtime {

CpuDecoderState::CpuDecoderState(std::shared_ptr<const CpuModel> model) : model_(std::move(model)) {}

void CpuDecoderState::resize(int64_t rows, int64_t positions, int64_t src, int64_t rows_in_use,
                             int64_t cross_in_use) {
  rows = std::max(rows, rows_), positions = std::max(positions, positions_), src = std::max(src, src_);
  if (rows == rows_ && positions == positions_ && src == src_) return;
  const int64_t width = 2 * model_->shape().d_model;
  const size_t layers = static_cast<size_t>(model_->shape().decoder_layers);
  std::vector<std::vector<float>> self(layers), cross(layers);
  for (size_t l = 0; l < layers; ++l) {
    self[l].assign(static_cast<size_t>(rows * positions * width), 0.0f);
    cross[l].assign(static_cast<size_t>(rows * src * width), 0.0f);
    for (int64_t r = 0; r < std::min(rows_in_use, rows_) && positions_ > 0; ++r)
      std::memcpy(self[l].data() + r * positions * width, self_kv_[l].data() + r * positions_ * width,
                  sizeof(float) * static_cast<size_t>(positions_ * width));
    for (int64_t r = 0; r < std::min(cross_in_use, rows_) && src_ > 0; ++r)
      std::memcpy(cross[l].data() + r * src * width, cross_kv_[l].data() + r * src_ * width,
                  sizeof(float) * static_cast<size_t>(src_ * width));
  }
  self_kv_ = std::move(self), cross_kv_ = std::move(cross);
  rows_ = rows, positions_ = positions, src_ = src;
}

void CpuDecoderState::add_sources(const std::vector<std::vector<int64_t>>& sources,
                                  const std::vector<int64_t>& cross_slots) {
  const int64_t batch = static_cast<int64_t>(sources.size()), c = model_->shape().d_model;
  if (batch == 0) return;
  int64_t width = 0;
  for (const auto& s : sources) width = std::max(width, static_cast<int64_t>(s.size()));
  if (width > src_) throw std::logic_error("add_sources: a source of " + std::to_string(width) +
                                           " tokens in cross slots of " + std::to_string(src_));
  // One encoder pass over the newcomers (padded; the encoder reads each
  // sentence's own tokens only).
  std::vector<int64_t> tokens(static_cast<size_t>(batch * width), kPadId), lengths(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const auto& s = sources[static_cast<size_t>(b)];
    std::copy(s.begin(), s.end(), tokens.begin() + b * width);
    lengths[static_cast<size_t>(b)] = static_cast<int64_t>(s.size());
  }
  std::vector<float> memory(static_cast<size_t>(batch * width * c));
  model_->encode(tokens.data(), lengths.data(), batch, width, memory.data());
  // Only each sentence's own positions are projected, one sentence after
  // another (a few sentences joining a service's running batch have any
  // lengths: two random ones are a quarter padding); the padding positions of
  // its cross slot get zeros, which nothing reads (attention stops at each
  // sentence's length).
  std::vector<int64_t> first(static_cast<size_t>(batch) + 1, 0);
  for (int64_t b = 0; b < batch; ++b) first[static_cast<size_t>(b) + 1] = first[static_cast<size_t>(b)] + lengths[static_cast<size_t>(b)];
  const int64_t n = first.back();
  const bool padded = n < batch * width;
  std::vector<float> rows_in;  // [n, C]: the packed rows (memory itself when nothing is padding)
  if (padded) {
    rows_in.resize(static_cast<size_t>(n * c));
    for (int64_t b = 0; b < batch; ++b)
      std::memcpy(rows_in.data() + first[static_cast<size_t>(b)] * c, memory.data() + b * width * c,
                  sizeof(float) * static_cast<size_t>(lengths[static_cast<size_t>(b)] * c));
  }
  const float* rows = padded ? rows_in.data() : memory.data();
  std::vector<float> kv(static_cast<size_t>(n * 2 * c));  // [n, 2C]
  for (size_t l = 0; l < cross_kv_.size(); ++l) {
    model_->cross_kv(static_cast<int64_t>(l), rows, n, kv.data());
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t slot = cross_slots[static_cast<size_t>(b)], len = lengths[static_cast<size_t>(b)];
      if (slot < 0 || slot >= rows_) throw std::logic_error("add_sources: cross slot " + std::to_string(slot));
      float* out = cross_kv_[l].data() + slot * src_ * 2 * c;
      std::memcpy(out, kv.data() + first[static_cast<size_t>(b)] * 2 * c, sizeof(float) * static_cast<size_t>(len * 2 * c));
      std::memset(out + len * 2 * c, 0, sizeof(float) * static_cast<size_t>((width - len) * 2 * c));
    }
  }
}

DecoderStepParams CpuDecoderState::params(int64_t n, const int64_t* tokens, const int64_t* positions,
                                          const int64_t* cross_rows, const int64_t* src_lengths) {
  const ModelShape& m = model_->shape();
  if (n > rows_) throw std::logic_error("step: " + std::to_string(n) + " rows in " + std::to_string(rows_) + " slots");
  int64_t max_position = 0, max_src = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (tokens[r] < 0 || tokens[r] >= m.tgt_vocab)
      throw std::invalid_argument("decode step: token " + std::to_string(tokens[r]) + " is outside the vocabulary of " +
                                  std::to_string(m.tgt_vocab));
    if (cross_rows[r] < 0 || cross_rows[r] >= rows_)
      throw std::logic_error("decode step: cross row " + std::to_string(cross_rows[r]) + " of " + std::to_string(rows_));
    max_position = std::max(max_position, positions[r]);
    max_src = std::max(max_src, src_lengths[r]);
  }
  if (max_position >= positions_ || max_position >= m.max_positions)
    throw std::logic_error("decode step: position " + std::to_string(max_position) + " past the cache's " +
                           std::to_string(positions_) + " (model.max_positions " + std::to_string(m.max_positions) + ")");
  DecoderStepParams p = model_->step_params();
  p.rows = n;
  p.max_len = positions_;
  p.src_len = max_src;
  p.tokens = tokens, p.positions = positions, p.src_lengths = src_lengths, p.cross_rows = cross_rows;
  const int64_t width = 2 * m.d_model;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    DecoderStepLayer& d = p.layers[l];
    d.self_kv = self_kv_[l].data(), d.cross_kv = cross_kv_[l].data();
    d.self_kv_stride_b = positions_ * width, d.cross_kv_stride_b = src_ * width;
  }
  const int64_t floats =
      decoder_step_workspace_floats(n, m.d_model, m.heads, m.ff_dim, std::max(p.max_len, p.src_len));
  if (static_cast<int64_t>(workspace_.size()) < floats) workspace_.resize(static_cast<size_t>(floats));
  if (static_cast<int64_t>(key_lengths_.size()) < n) key_lengths_.resize(static_cast<size_t>(n));
  logits_.resize(static_cast<size_t>(n * m.tgt_vocab));
  p.workspace = workspace_.data(), p.key_lengths = key_lengths_.data(), p.logits = logits_.data();
  return p;
}

float* CpuDecoderState::step(int64_t n, const int64_t* tokens, const int64_t* positions, const int64_t* cross_rows,
                             const int64_t* src_lengths) {
  decoder_step_cpu(params(n, tokens, positions, cross_rows, src_lengths));
  return logits_.data();
}

void CpuDecoderState::step_recording(int64_t token, int64_t position, int64_t src_len,
                                     std::vector<std::vector<float>>& self_probs,
                                     std::vector<std::vector<float>>& cross_probs) {
  const int64_t cross_row = 0;
  DecoderStepParams p = params(1, &token, &position, &cross_row, &src_len);
  p.naive_attention = true;
  for (size_t l = 0; l < p.layers.size(); ++l)
    p.layers[l].self_probs = self_probs[l].data(), p.layers[l].cross_probs = cross_probs[l].data();
  decoder_step_cpu(p);
}

void CpuDecoderState::copy_row(int64_t to, int64_t from, int64_t positions) {
  // A beam search copies a few rows every step: plain copies of the slots'
  // contiguous rows.
  const int64_t width = 2 * model_->shape().d_model;
  for (std::vector<float>& layer : self_kv_)
    std::memcpy(layer.data() + to * positions_ * width, layer.data() + from * positions_ * width,
                sizeof(float) * static_cast<size_t>(positions * width));
}

void CpuDecoderState::release() {
  self_kv_.clear(), cross_kv_.clear();
  workspace_ = {}, logits_ = {}, key_lengths_ = {};
  rows_ = positions_ = src_ = 0;
}

}  // namespace nmt::runtime
