#include "decode/continuous_greedy.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "data/dataset.h"
#include "ops/argmax/cpu/argmax_cpu.h"

namespace nmt {

ContinuousGreedy::ContinuousGreedy(Transformer& model, DecodeOptions options, c10::Device device)
    : model_(model), options_(options), constraint_(options_.sentinel_ids), device_(device) {
  // Limits as decode() sets them; a row feeds its <start> and every token it
  // produces before the last.
  capacity_ = std::min(options_.max_len, model_->options().max_positions() - 1);
  if (!model_->decoding_prepared()) output_table_ = model_->step_output_table();
}

void ContinuousGreedy::add(const std::vector<std::vector<int64_t>>& sources, const std::vector<uint64_t>& tickets,
                           const std::vector<std::vector<int64_t>>& owed) {
  if (sources.empty()) return;
  if (!owed.empty() && owed.size() != sources.size())
    throw std::invalid_argument("ContinuousGreedy::add: owed sentinels for " + std::to_string(owed.size()) + " of " +
                                std::to_string(sources.size()) + " sources");
  torch::NoGradGuard no_grad;
  auto [src, src_len] = make_source_batch(sources);
  src = src.to(device_), src_len = src_len.to(device_);
  const torch::Tensor memory = model_->encode(src, src_len);  // [n, S, C]
  // Only the cross-attention keys/values are taken from it (the output
  // table is output_table_, made once).
  const DecoderCache added = model_->start_decoding(memory, src_len, 1, /*output_table=*/false);
  const int64_t first = rows(), n = static_cast<int64_t>(sources.size()), width = src.size(1);
  int64_t positions = 1;
  for (size_t i = 0; i < sources.size(); ++i) {
    const int64_t len = static_cast<int64_t>(sources[i].size());
    const bool constrained = constraint_.active() && !owed.empty();
    rows_.push_back({tickets[i], decode_limit(options_, model_->options().max_positions(), len), 0, kStartId, len, {},
                     constrained ? owed[i] : std::vector<int64_t>{}, constrained});
    positions = std::max(positions, rows_.back().limit);
    source_tokens_ += len;
  }
  reserve(rows(), positions, width, first, added.layers[0].cross_kv.options());
  for (size_t l = 0; l < slots_.size(); ++l)
    slots_[l].cross_kv.narrow(0, first, n).narrow(1, 0, width).copy_(added.layers[l].cross_kv);
}

std::vector<int64_t> argmax_rows(const torch::Tensor& logits) {
  // Our kernel on the CPU: LibTorch's reduction cost more than the output
  // projection's share of a step at batch 32.
  if (logits.device().is_cpu() && logits.scalar_type() == torch::kFloat && logits.dim() == 2 && logits.size(1) > 0) {
    const torch::Tensor x = logits.stride(1) == 1 ? logits : logits.contiguous();
    std::vector<int64_t> out(static_cast<size_t>(x.size(0)));
    ops::cpu::ArgmaxParams p{x.data_ptr<float>(), out.data(), x.size(0), x.size(1), x.stride(0)};
    ops::cpu::argmax_rows(p);
    return out;
  }
  const torch::Tensor ids = logits.argmax(-1).to(torch::kCPU, torch::kLong).contiguous();
  return std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
}

void ContinuousGreedy::reserve(int64_t slots, int64_t positions, int64_t src, int64_t in_use,
                               const torch::TensorOptions& opts) {
  const int64_t have_slots = slots_.empty() ? 0 : slots_[0].self_kv.size(0);
  const int64_t have_positions = slots_.empty() ? 0 : slots_[0].self_kv.size(1);
  const int64_t have_src = slots_.empty() ? 0 : slots_[0].cross_kv.size(1);
  if (slots <= have_slots && positions <= have_positions && src <= have_src) return;
  slots = std::max(slots, planned_rows_);
  src = std::min(std::max(src, planned_src_), model_->options().max_positions());
  const auto grow = [](int64_t have, int64_t need, int64_t most) {
    return need <= have ? have : std::min(std::max(need, 2 * have), std::max(need, most));
  };
  // Rows have no cap of their own: the caller's token budget bounds them.
  const int64_t new_slots = slots <= have_slots ? have_slots : std::max(slots, 2 * have_slots);
  const int64_t new_positions = grow(have_positions, positions, capacity_);
  const int64_t new_src = grow(have_src, src, model_->options().max_positions());
  const int64_t width = 2 * model_->options().d_model();
  const int64_t layers = model_->options().decoder_layers();
  std::vector<LayerCache> next;
  for (int64_t l = 0; l < layers; ++l) {
    LayerCache c{torch::zeros({new_slots, new_positions, width}, opts), torch::zeros({new_slots, new_src, width}, opts)};
    if (!slots_.empty() && in_use > 0) {
      c.self_kv.narrow(0, 0, in_use).narrow(1, 0, have_positions).copy_(slots_[l].self_kv.narrow(0, 0, in_use));
      c.cross_kv.narrow(0, 0, in_use).narrow(1, 0, have_src).copy_(slots_[l].cross_kv.narrow(0, 0, in_use));
    }
    next.push_back(std::move(c));
  }
  slots_ = std::move(next);
}

void ContinuousGreedy::release() {
  if (!rows_.empty()) return;
  slots_.clear();
  step_workspace_ = at::Tensor(), step_key_lengths_ = at::Tensor();
}

void ContinuousGreedy::remove(int64_t r) {
  const int64_t last = rows() - 1;
  if (r != last) {
    const Row& moved = rows_[last];
    for (LayerCache& c : slots_) {
      if (moved.position > 0) c.self_kv[r].narrow(0, 0, moved.position).copy_(c.self_kv[last].narrow(0, 0, moved.position));
      c.cross_kv[r].narrow(0, 0, moved.src_len).copy_(c.cross_kv[last].narrow(0, 0, moved.src_len));
    }
    rows_[r] = std::move(rows_[last]);
  }
  rows_.pop_back();
}

std::vector<std::pair<uint64_t, std::vector<int64_t>>> ContinuousGreedy::step() {
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> finished;
  if (rows_.empty()) return finished;
  torch::NoGradGuard no_grad;
  const int64_t n = rows();
  std::vector<int64_t> tokens(n), positions(n), src_lengths(n);
  int64_t max_position = 0, max_src = 0;
  for (int64_t r = 0; r < n; ++r) {
    tokens[r] = rows_[r].next;
    positions[r] = rows_[r].position;
    src_lengths[r] = rows_[r].src_len;
    max_position = std::max(max_position, positions[r]);
    max_src = std::max(max_src, src_lengths[r]);
  }
  // The rows in use, as views of the slots (writes land in the slots).
  DecoderCache cache;
  for (LayerCache& c : slots_) cache.layers.push_back({c.self_kv.narrow(0, 0, n), c.cross_kv.narrow(0, 0, n).narrow(1, 0, max_src)});
  cache.src_lengths = torch::tensor(src_lengths, torch::kLong).to(device_);
  cache.output_weight_t = output_table_;
  cache.step_workspace = step_workspace_, cache.step_key_lengths = step_key_lengths_;
  const torch::Tensor logits =  // [n, V]
      model_->decode_step_rows(torch::tensor(tokens, torch::kLong).to(device_),
                               torch::tensor(positions, torch::kLong).to(device_), max_position, cache);
  step_workspace_ = cache.step_workspace, step_key_lengths_ = cache.step_key_lengths;
  std::vector<PlaceholderConstraint::Row> constrained(n);
  bool any = false;
  for (int64_t r = 0; r < n; ++r)
    if (rows_[r].constrained) constrained[r] = {&rows_[r].owed, &rows_[r].out, rows_[r].limit}, any = true;
  if (any) constraint_.apply(logits, constrained);
  const std::vector<int64_t> next = argmax_rows(logits);
  std::vector<int64_t> ended;
  for (int64_t r = 0; r < n; ++r) {
    Row& row = rows_[r];
    ++row.position;
    if (next[r] != kEndId) row.out.push_back(next[r]);
    row.next = next[r];
    if (next[r] == kEndId || static_cast<int64_t>(row.out.size()) >= row.limit) {
      finished.emplace_back(row.ticket, std::move(row.out));
      source_tokens_ -= row.src_len;
      ended.push_back(r);
    }
  }
  // From the back: the row moved into an ended one's slot has not ended
  // (ended rows behind it were removed first).
  for (auto it = ended.rbegin(); it != ended.rend(); ++it) remove(*it);
  return finished;
}

}  // namespace nmt
