#include "decode/continuous_search.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "data/dataset.h"
#include "ops/argmax/cpu/argmax_cpu.h"
#include "ops/top_k/cpu/top_k_cpu.h"

namespace nmt {

namespace beam_rules {

double length_norm(double alpha, size_t len) {
  return alpha == 0.0 ? 1.0 : std::pow((5.0 + static_cast<double>(len)) / 6.0, alpha);
}

double normalized(double score, size_t tokens, bool has_end, double alpha) {
  return score / length_norm(alpha, tokens + (has_end ? 1 : 0));
}

bool done(double best_ended, double best_live, int64_t limit, double alpha, bool early_stop) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  if (best_live == kNegInf) return true;
  // (A negative alpha would favour short hypotheses: no bound then, wait for all.)
  if (!early_stop || alpha < 0 || best_ended == kNegInf) return false;
  return best_ended >= best_live / length_norm(alpha, static_cast<size_t>(limit) + 1);
}

}  // namespace beam_rules

ContinuousSearch::ContinuousSearch(Transformer& model, DecodeOptions options, c10::Device device)
    : model_(model), options_(options), constraint_(options_.sentinel_ids), device_(device) {
  // Limits as decode() sets them; a row feeds its <start> and every token it
  // produces before the last.
  capacity_ = std::min(options_.max_len, model_->options().max_positions() - 1);
  if (!model_->decoding_prepared()) output_table_ = model_->step_output_table();
}

void ContinuousSearch::add(const std::vector<std::vector<int64_t>>& sources, const std::vector<uint64_t>& tickets,
                           const std::vector<std::vector<int64_t>>& owed, const std::vector<int64_t>& beams) {
  if (sources.empty()) return;
  if (!owed.empty() && owed.size() != sources.size())
    throw std::invalid_argument("ContinuousSearch::add: owed sentinels for " + std::to_string(owed.size()) + " of " +
                                std::to_string(sources.size()) + " sources");
  if (!beams.empty() && beams.size() != sources.size())
    throw std::invalid_argument("ContinuousSearch::add: beam widths for " + std::to_string(beams.size()) + " of " +
                                std::to_string(sources.size()) + " sources");
  torch::NoGradGuard no_grad;
  auto [src, src_len] = make_source_batch(sources);
  src = src.to(device_), src_len = src_len.to(device_);
  const torch::Tensor memory = model_->encode(src, src_len);  // [n, S, C]
  // Only the cross-attention keys/values are taken from it (the output
  // table is output_table_, made once).
  const DecoderCache added = model_->start_decoding(memory, src_len, 1, /*output_table=*/false);
  const int64_t first = rows(), width = src.size(1);
  int64_t positions = 1;
  const bool constrained = constraint_.active() && !owed.empty();
  std::vector<int64_t> cross_slots;  // each newcomer's
  cross_slots.reserve(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    const int64_t len = static_cast<int64_t>(sources[i].size());
    const int64_t beam = std::max<int64_t>(0, beams.empty() ? options_.beam : beams[i]);
    Sentence s{tickets[i], beam, decode_limit(options_, model_->options().max_positions(), len), len,
               constrained ? owed[i] : std::vector<int64_t>{}, constrained, {}};
    positions = std::max(positions, s.limit);
    s.cross_slot = take_cross_slot();
    cross_slots.push_back(s.cross_slot);
    sentences_.emplace(next_sentence_, std::move(s));
    // Every sentence starts as one row; a beam grows to K rows at its first step.
    rows_.push_back({next_sentence_++, 0, kStartId, {}, 0.0, 0});
    source_tokens_ += len;
  }
  reserve(rows(), positions, width, first, added.layers[0].cross_kv.options());
  // Each newcomer's encoder keys/values into its sentence's cross slot.
  const torch::Tensor index = torch::tensor(cross_slots, torch::kLong).to(device_);
  for (size_t l = 0; l < slots_.size(); ++l)
    slots_[l].cross_kv.narrow(1, 0, width).index_copy_(0, index, added.layers[l].cross_kv);
}

int64_t ContinuousSearch::take_cross_slot() {
  if (free_cross_.empty()) return cross_slots_used_++;
  const int64_t slot = free_cross_.back();
  free_cross_.pop_back();
  return slot;
}

void ContinuousSearch::drop_sentence(int64_t s) {
  free_cross_.push_back(sentences_.at(s).cross_slot);
  sentences_.erase(s);
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

void ContinuousSearch::reserve(int64_t slots, int64_t positions, int64_t src, int64_t in_use,
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
    }
    // Cross slots belong to sentences, not rows: every one taken so far
    // (slots of finished sentences too: they are few, and free).
    if (!slots_.empty() && cross_slots_used_ > 0) {
      const int64_t used = std::min(cross_slots_used_, have_slots);
      c.cross_kv.narrow(0, 0, used).narrow(1, 0, have_src).copy_(slots_[l].cross_kv.narrow(0, 0, used));
    }
    next.push_back(std::move(c));
  }
  slots_ = std::move(next);
}

void ContinuousSearch::release() {
  if (!rows_.empty()) return;
  slots_.clear();
  free_cross_.clear(), cross_slots_used_ = 0;
  step_workspace_ = at::Tensor(), step_key_lengths_ = at::Tensor();
}

void ContinuousSearch::copy_row(int64_t to, int64_t from) {
  const int64_t positions = rows_[from].position;
  if (positions == 0) return;
  for (LayerCache& c : slots_) {
    if (c.self_kv.device().is_cpu()) {
      // A beam search copies a few rows every step: plain copies of the
      // slots' contiguous rows, not a LibTorch op each.
      const at::Tensor& t = c.self_kv;
      const int64_t row_bytes = t.stride(0) * static_cast<int64_t>(t.element_size());
      char* base = static_cast<char*>(t.data_ptr());
      std::memcpy(base + to * row_bytes, base + from * row_bytes,
                  static_cast<size_t>(positions * t.stride(1) * t.element_size()));
    } else {
      c.self_kv[to].narrow(0, 0, positions).copy_(c.self_kv[from].narrow(0, 0, positions));
    }
  }
}

void ContinuousSearch::remove(int64_t r) {
  const int64_t last = rows() - 1;
  if (r != last) {
    copy_row(r, last);
    rows_[r] = std::move(rows_[last]);
  }
  rows_.pop_back();
}

void ContinuousSearch::select_beam(int64_t s, const std::vector<int64_t>& rows, const at::Tensor& logits,
                                   std::vector<int64_t>& dropped,
                                   std::vector<std::pair<uint64_t, std::vector<int64_t>>>& finished) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  Sentence& sentence = sentences_.at(s);
  const int64_t k = sentence.beam, vocab = logits.size(1);
  // The candidates: the ended hypotheses, carried unchanged, and each live
  // one's K best continuations (a row's K largest logits: its normalizer is
  // the same for all of them). Equal scores keep the order a sort of
  // [ended by rank, continuations by rank * V + token] gives.
  std::vector<Candidate> cands;
  for (size_t i = 0; i < sentence.ended.size(); ++i)
    cands.push_back({sentence.ended[i].score, -1, static_cast<int64_t>(i), sentence.ended[i].rank});
  for (int64_t r : rows) {
    const Row& row = rows_[r];
    for (int64_t i = 0; i < k; ++i) {
      const int64_t token = top_index_[r * top_stride_ + i];
      if (token < 0) break;
      // log_softmax(x)[t], the normalizer within 3e-7 of the double one (ops/top_k).
      const double logp = (static_cast<double>(top_value_[r * top_stride_ + i]) - row_max_[r]) - row_log_sum_[r];
      cands.push_back({row.score + logp, r, token, k + row.rank * vocab + token});
    }
  }
  const size_t picks = std::min(cands.size(), static_cast<size_t>(k));
  std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(picks), cands.end(),
                    [](const Candidate& a, const Candidate& b) {
                      return a.score != b.score ? a.score > b.score : a.order < b.order;
                    });
  // The new hypotheses, by rank: ended ones, and live ones with their parents.
  struct Child {
    int64_t parent;
    int64_t token;
    double score;
    int64_t rank;
  };
  std::vector<Ended> ended;
  std::vector<Child> children;
  for (size_t j = 0; j < picks; ++j) {
    const Candidate& c = cands[j];
    const int64_t rank = static_cast<int64_t>(j);
    if (c.row < 0) {
      ended.push_back(std::move(sentence.ended[static_cast<size_t>(c.token)]));
      ended.back().rank = rank;
    } else if (c.token == kEndId) {
      ended.push_back({rows_[c.row].out, c.score, true, rank});
    } else if (static_cast<int64_t>(rows_[c.row].out.size()) + 1 >= sentence.limit) {
      ended.push_back({rows_[c.row].out, c.score, false, rank});
      ended.back().out.push_back(c.token);
    } else {
      children.push_back({c.row, c.token, c.score, rank});
    }
  }
  double best_ended = kNegInf, best_live = kNegInf;
  const Ended* best = nullptr;  // the first of equal normalized scores by rank
  for (const Ended& e : ended) {
    const double norm = beam_rules::normalized(e.score, e.out.size(), e.has_end, options_.length_penalty);
    if (norm > best_ended) best_ended = norm, best = &e;
  }
  for (const Child& c : children) best_live = std::max(best_live, c.score);
  if (beam_rules::done(best_ended, best_live, sentence.limit, options_.length_penalty, options_.beam_early_stop)) {
    finished.emplace_back(sentence.ticket, best != nullptr ? best->out : std::vector<int64_t>{});
    dropped.insert(dropped.end(), rows.begin(), rows.end());
    source_tokens_ -= sentence.src_len;
    drop_sentence(s);
    return;
  }
  sentence.ended = std::move(ended);
  // Rows for the live hypotheses. A parent's first continuation stays in its
  // row (its keys/values are already there); the others take the rows of
  // hypotheses that had none, or new rows, with the parent's keys/values
  // copied over. The parents' rows are not written before every copy is made.
  std::vector<Row> next;
  next.reserve(children.size());
  for (const Child& c : children) {
    const Row& parent = rows_[c.parent];
    next.push_back({s, parent.position, c.token, parent.out, c.score, c.rank});
    next.back().out.push_back(c.token);
  }
  std::vector<char> claimed(rows.size(), 0);
  std::vector<size_t> in_place(children.size(), SIZE_MAX);  // children[i] continues in rows[in_place[i]]
  for (size_t i = 0; i < children.size(); ++i) {
    const size_t at = static_cast<size_t>(std::find(rows.begin(), rows.end(), children[i].parent) - rows.begin());
    if (!claimed[at]) claimed[at] = 1, in_place[i] = at;
  }
  std::vector<int64_t> free_rows;
  for (size_t i = 0; i < rows.size(); ++i)
    if (!claimed[i]) free_rows.push_back(rows[i]);
  size_t next_free = 0;
  for (size_t i = 0; i < children.size(); ++i) {
    if (in_place[i] != SIZE_MAX) continue;
    if (next_free < free_rows.size()) {
      copy_row(free_rows[next_free], children[i].parent);
      ++rows_copied_;
      rows_[free_rows[next_free++]] = std::move(next[i]);
    } else {
      const int64_t r = this->rows();
      reserve(r + 1, 1, 1, r, slots_[0].self_kv.options());
      Row placeholder = rows_[children[i].parent];  // copy_row reads the parent's position
      rows_.push_back(std::move(placeholder));
      copy_row(r, children[i].parent);
      ++rows_copied_;
      rows_[r] = std::move(next[i]);
    }
  }
  for (size_t i = 0; i < children.size(); ++i)
    if (in_place[i] != SIZE_MAX) rows_[rows[in_place[i]]] = std::move(next[i]);
  dropped.insert(dropped.end(), free_rows.begin() + static_cast<std::ptrdiff_t>(next_free), free_rows.end());
}

std::vector<std::pair<uint64_t, std::vector<int64_t>>> ContinuousSearch::step() {
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> finished;
  if (rows_.empty()) return finished;
  torch::NoGradGuard no_grad;
  const int64_t n = rows();
  std::vector<int64_t> tokens(n), positions(n), src_lengths(n), cross_rows(n);
  // Each row's sentence, looked up once (a greedy one may be erased below,
  // so after that only width is read for every row).
  std::vector<Sentence*> sentence_of(static_cast<size_t>(n));
  std::vector<int64_t> width(static_cast<size_t>(n));  // each row's beam width (0: greedy)
  int64_t max_position = 0, max_src = 0, widest = 0;
  bool any_beam = false, any_greedy = false;
  for (int64_t r = 0; r < n; ++r) {
    Sentence& s = sentences_.at(rows_[r].sentence);
    sentence_of[r] = &s, width[r] = s.beam;
    tokens[r] = rows_[r].next;
    positions[r] = rows_[r].position;
    src_lengths[r] = s.src_len;
    cross_rows[r] = s.cross_slot;
    max_position = std::max(max_position, positions[r]);
    max_src = std::max(max_src, src_lengths[r]);
    widest = std::max(widest, s.beam);
    (s.beam > 0 ? any_beam : any_greedy) = true;
  }
  // The rows in use, as views of the slots (writes land in the slots).
  DecoderCache cache;
  for (LayerCache& c : slots_) cache.layers.push_back({c.self_kv.narrow(0, 0, n), c.cross_kv.narrow(1, 0, max_src)});
  cache.src_lengths = torch::tensor(src_lengths, torch::kLong).to(device_);
  cache.cross_rows = torch::tensor(cross_rows, torch::kLong);
  cache.output_weight_t = output_table_;
  cache.step_workspace = step_workspace_, cache.step_key_lengths = step_key_lengths_;
  torch::Tensor logits =  // [n, V]
      model_->decode_step_rows(torch::tensor(tokens, torch::kLong).to(device_),
                               torch::tensor(positions, torch::kLong).to(device_), max_position, cache);
  step_workspace_ = cache.step_workspace, step_key_lengths_ = cache.step_key_lengths;
  for (Row& row : rows_) ++row.position;
  // Beam rows are selected on the CPU, from float32 logits.
  if (any_beam && !(logits.device().is_cpu() && logits.scalar_type() == torch::kFloat && logits.is_contiguous()))
    logits = logits.to(torch::kCPU, torch::kFloat).contiguous();
  const int64_t vocab = logits.size(1);
  // Beam rows' log-softmax normalizers, from the logits as the model gave
  // them (the constraint below forbids tokens, it does not renormalize).
  top_stride_ = widest;
  if (any_beam) {
    top_index_.assign(static_cast<size_t>(n * widest), -1);
    top_value_.assign(static_cast<size_t>(n * widest), 0.0f);
    row_max_.assign(static_cast<size_t>(n), 0.0f);
    row_log_sum_.assign(static_cast<size_t>(n), 0.0);
  }
  const float* data = any_beam ? logits.data_ptr<float>() : nullptr;
  const auto top_k = [&](int64_t r, bool normalizer) {
    ops::cpu::TopKParams p{data + r * vocab, vocab, width[r], &row_max_[r],
                           &row_log_sum_[r], &top_index_[r * widest], &top_value_[r * widest], normalizer};
    ops::cpu::log_softmax_top_k(p);
  };
  for (int64_t r = 0; r < n && any_beam; ++r)
    if (width[r] > 0) top_k(r, true);
  std::vector<PlaceholderConstraint::Row> constrained(n);
  bool any = false;
  for (int64_t r = 0; r < n; ++r) {
    const Sentence& s = *sentence_of[r];
    if (s.constrained) constrained[r] = {&s.owed, &rows_[r].out, s.limit}, any = true;
  }
  if (any) {
    constraint_.apply(logits, constrained);
    for (int64_t r = 0; r < n && any_beam; ++r)
      if (constrained[r].owed != nullptr && width[r] > 0) top_k(r, false);
  }
  // Greedy rows: the argmax.
  std::vector<int64_t> dropped;
  if (any_greedy) {
    std::vector<int64_t> next;
    if (!any_beam) {
      next = argmax_rows(logits);
    } else {
      next.assign(static_cast<size_t>(n), kEndId);
      for (int64_t r = 0; r < n; ++r)
        if (width[r] == 0) {
          ops::cpu::ArgmaxParams p{data + r * vocab, &next[r], 1, vocab, vocab};
          ops::cpu::argmax_rows(p);
        }
    }
    for (int64_t r = 0; r < n; ++r) {
      if (width[r] > 0) continue;
      const Sentence& s = *sentence_of[r];
      Row& row = rows_[r];
      if (next[r] != kEndId) row.out.push_back(next[r]);
      row.next = next[r];
      if (next[r] == kEndId || static_cast<int64_t>(row.out.size()) >= s.limit) {
        finished.emplace_back(s.ticket, std::move(row.out));
        source_tokens_ -= s.src_len;
        drop_sentence(row.sentence);  // s dangles from here on; its only row was this one
        dropped.push_back(r);
      }
    }
  }
  // Beam sentences: each picks its K best continuations (rows may be
  // appended: only the first n are this step's).
  if (any_beam) {
    std::map<int64_t, std::vector<int64_t>> rows_of;
    for (int64_t r = 0; r < n; ++r)
      if (width[r] > 0) rows_of[rows_[r].sentence].push_back(r);
    for (auto& [s, rows] : rows_of) {
      std::sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) { return rows_[a].rank < rows_[b].rank; });
      select_beam(s, rows, logits, dropped, finished);
    }
  }
  // From the back: the row moved into a dropped one's slot is not dropped
  // (dropped rows behind it were removed first).
  std::sort(dropped.begin(), dropped.end());
  for (auto it = dropped.rbegin(); it != dropped.rend(); ++it) remove(*it);
  return finished;
}

}  // namespace nmt
