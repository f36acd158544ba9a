#include "runtime/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "ops/argmax/cpu/argmax_cpu.h"
#include "ops/top_k/cpu/top_k_cpu.h"
#include "tokenizer/special_ids.h"
#include "util/errors.h"
#include "util/interrupt.h"
#include "util/test_hooks.h"

namespace nmt::runtime {

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

std::vector<int64_t> argmax_rows(const float* logits, int64_t rows, int64_t vocab) {
  std::vector<int64_t> out(static_cast<size_t>(rows));
  if (rows == 0 || vocab == 0) return out;
  ops::cpu::ArgmaxParams p{logits, out.data(), rows, vocab, vocab};
  ops::cpu::argmax_rows(p);
  return out;
}

Search::Search(std::unique_ptr<DecoderState> state, DecodeOptions options, int64_t max_positions)
    : state_(std::move(state)), options_(std::move(options)), constraint_(options_.sentinel_ids),
      max_positions_(max_positions) {
  // A row feeds its <start> and every token it produces before the last.
  capacity_ = std::min(options_.max_len, max_positions_ - 1);
}

void Search::add(const std::vector<std::vector<int64_t>>& sources, const std::vector<uint64_t>& tickets,
                 const std::vector<std::vector<int64_t>>& owed, const std::vector<int64_t>& beams) {
  if (sources.empty()) return;
  if (!owed.empty() && owed.size() != sources.size())
    throw std::invalid_argument("Search::add: owed sentinels for " + std::to_string(owed.size()) + " of " +
                                std::to_string(sources.size()) + " sources");
  if (!beams.empty() && beams.size() != sources.size())
    throw std::invalid_argument("Search::add: beam widths for " + std::to_string(beams.size()) + " of " +
                                std::to_string(sources.size()) + " sources");
  int64_t width = 0;
  for (const std::vector<int64_t>& s : sources) {
    if (s.empty()) throw std::invalid_argument("Search::add: an empty source");
    width = std::max(width, static_cast<int64_t>(s.size()));
  }
  const int64_t first = rows();
  int64_t positions = 1;
  const bool constrained = constraint_.active() && !owed.empty();
  std::vector<int64_t> cross_slots;  // each newcomer's
  cross_slots.reserve(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    const int64_t len = static_cast<int64_t>(sources[i].size());
    const int64_t beam = std::max<int64_t>(0, beams.empty() ? options_.beam : beams[i]);
    Sentence s{tickets[i], beam, decode_limit(options_, max_positions_, len), len,
               constrained ? owed[i] : std::vector<int64_t>{}, constrained, {}};
    positions = std::max(positions, s.limit);
    s.cross_slot = take_cross_slot();
    cross_slots.push_back(s.cross_slot);
    sentences_.emplace(next_sentence_, std::move(s));
    // Every sentence starts as one row; a beam grows to K rows at its first step.
    rows_.push_back({next_sentence_++, 0, kStartId, {}, 0.0, 0});
    source_tokens_ += len;
  }
  reserve(rows(), positions, width, first);
  // Each newcomer's encoder keys/values into its sentence's cross slot.
  state_->add_sources(sources, cross_slots);
}

int64_t Search::take_cross_slot() {
  if (free_cross_.empty()) return cross_slots_used_++;
  const int64_t slot = free_cross_.back();
  free_cross_.pop_back();
  return slot;
}

void Search::drop_sentence(int64_t s) {
  free_cross_.push_back(sentences_.at(s).cross_slot);
  sentences_.erase(s);
}

void Search::reserve(int64_t slots, int64_t positions, int64_t src, int64_t in_use) {
  const int64_t have_slots = state_->rows(), have_positions = state_->positions();
  const int64_t have_src = state_->source_positions();
  if (slots <= have_slots && positions <= have_positions && src <= have_src) return;
  slots = std::max(slots, planned_rows_);
  src = std::min(std::max(src, planned_src_), max_positions_);
  const auto grow = [](int64_t have, int64_t need, int64_t most) {
    return need <= have ? have : std::min(std::max(need, 2 * have), std::max(need, most));
  };
  // Rows have no cap of their own: the caller's token budget bounds them.
  const int64_t new_slots = slots <= have_slots ? have_slots : std::max(slots, 2 * have_slots);
  // Cross slots belong to sentences, not rows: every one taken so far is
  // kept (slots of finished sentences too: they are few, and free).
  state_->resize(new_slots, grow(have_positions, positions, capacity_), grow(have_src, src, max_positions_), in_use,
                 std::min(cross_slots_used_, have_slots));
}

void Search::release() {
  if (!rows_.empty()) return;
  state_->release();
  free_cross_.clear(), cross_slots_used_ = 0;
}

void Search::copy_row(int64_t to, int64_t from) {
  const int64_t positions = rows_[static_cast<size_t>(from)].position;
  if (positions > 0) state_->copy_row(to, from, positions);
}

void Search::remove(int64_t r) {
  const int64_t last = rows() - 1;
  if (r != last) {
    copy_row(r, last);
    rows_[static_cast<size_t>(r)] = std::move(rows_[static_cast<size_t>(last)]);
  }
  rows_.pop_back();
}

void Search::select_beam(int64_t s, const std::vector<int64_t>& rows, int64_t vocab, std::vector<int64_t>& dropped,
                         std::vector<std::pair<uint64_t, std::vector<int64_t>>>& finished) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  Sentence& sentence = sentences_.at(s);
  const int64_t k = sentence.beam;
  // The candidates: the ended hypotheses, carried unchanged, and each live
  // one's K best continuations (a row's K largest logits: its normalizer is
  // the same for all of them). Equal scores keep the order a sort of
  // [ended by rank, continuations by rank * V + token] gives.
  std::vector<Candidate> cands;
  for (size_t i = 0; i < sentence.ended.size(); ++i)
    cands.push_back({sentence.ended[i].score, -1, static_cast<int64_t>(i), sentence.ended[i].rank});
  for (int64_t r : rows) {
    const Row& row = rows_[static_cast<size_t>(r)];
    for (int64_t i = 0; i < k; ++i) {
      const int64_t token = top_index_[static_cast<size_t>(r * top_stride_ + i)];
      if (token < 0) break;
      // log_softmax(x)[t], the normalizer within 3e-7 of the double one (ops/top_k).
      const double logp =
          (static_cast<double>(top_value_[static_cast<size_t>(r * top_stride_ + i)]) - row_max_[static_cast<size_t>(r)]) -
          row_log_sum_[static_cast<size_t>(r)];
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
      ended.push_back({rows_[static_cast<size_t>(c.row)].out, c.score, true, rank});
    } else if (static_cast<int64_t>(rows_[static_cast<size_t>(c.row)].out.size()) + 1 >= sentence.limit) {
      ended.push_back({rows_[static_cast<size_t>(c.row)].out, c.score, false, rank});
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
    const Row& parent = rows_[static_cast<size_t>(c.parent)];
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
      rows_[static_cast<size_t>(free_rows[next_free++])] = std::move(next[i]);
    } else {
      const int64_t r = this->rows();
      reserve(r + 1, 1, 1, r);
      Row placeholder = rows_[static_cast<size_t>(children[i].parent)];  // copy_row reads the parent's position
      rows_.push_back(std::move(placeholder));
      copy_row(r, children[i].parent);
      ++rows_copied_;
      rows_[static_cast<size_t>(r)] = std::move(next[i]);
    }
  }
  for (size_t i = 0; i < children.size(); ++i)
    if (in_place[i] != SIZE_MAX) rows_[static_cast<size_t>(rows[in_place[i]])] = std::move(next[i]);
  dropped.insert(dropped.end(), free_rows.begin() + static_cast<std::ptrdiff_t>(next_free), free_rows.end());
}

std::vector<std::pair<uint64_t, std::vector<int64_t>>> Search::step() {
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> finished;
  if (rows_.empty()) return finished;
  const int64_t n = rows();
  std::vector<int64_t> tokens(static_cast<size_t>(n)), positions(static_cast<size_t>(n)),
      src_lengths(static_cast<size_t>(n)), cross_rows(static_cast<size_t>(n));
  // Each row's sentence, looked up once (a greedy one may be erased below,
  // so after that only width is read for every row).
  std::vector<Sentence*> sentence_of(static_cast<size_t>(n));
  std::vector<int64_t> width(static_cast<size_t>(n));  // each row's beam width (0: greedy)
  int64_t widest = 0;
  bool any_beam = false, any_greedy = false;
  for (int64_t r = 0; r < n; ++r) {
    const size_t i = static_cast<size_t>(r);
    Sentence& s = sentences_.at(rows_[i].sentence);
    sentence_of[i] = &s, width[i] = s.beam;
    tokens[i] = rows_[i].next;
    positions[i] = rows_[i].position;
    src_lengths[i] = s.src_len;
    cross_rows[i] = s.cross_slot;
    widest = std::max(widest, s.beam);
    (s.beam > 0 ? any_beam : any_greedy) = true;
  }
  float* logits = state_->step(n, tokens.data(), positions.data(), cross_rows.data(), src_lengths.data());  // [n, V]
  for (Row& row : rows_) ++row.position;
  const int64_t vocab = state_->vocab();
  // Beam rows' log-softmax normalizers, from the logits as the model gave
  // them (the constraint below forbids tokens, it does not renormalize).
  top_stride_ = widest;
  if (any_beam) {
    top_index_.assign(static_cast<size_t>(n * widest), -1);
    top_value_.assign(static_cast<size_t>(n * widest), 0.0f);
    row_max_.assign(static_cast<size_t>(n), 0.0f);
    row_log_sum_.assign(static_cast<size_t>(n), 0.0);
  }
  const auto top_k = [&](int64_t r, bool normalizer) {
    const size_t i = static_cast<size_t>(r);
    ops::cpu::TopKParams p{logits + r * vocab, vocab, width[i], &row_max_[i],
                           &row_log_sum_[i], &top_index_[i * static_cast<size_t>(widest)],
                           &top_value_[i * static_cast<size_t>(widest)], normalizer};
    ops::cpu::log_softmax_top_k(p);
  };
  for (int64_t r = 0; r < n && any_beam; ++r)
    if (width[static_cast<size_t>(r)] > 0) top_k(r, true);
  std::vector<PlaceholderConstraint::Row> constrained(static_cast<size_t>(n));
  bool any = false;
  for (int64_t r = 0; r < n; ++r) {
    const Sentence& s = *sentence_of[static_cast<size_t>(r)];
    if (s.constrained) constrained[static_cast<size_t>(r)] = {&s.owed, &rows_[static_cast<size_t>(r)].out, s.limit}, any = true;
  }
  if (any) {
    constraint_.apply(logits, vocab, constrained);
    for (int64_t r = 0; r < n && any_beam; ++r)
      if (constrained[static_cast<size_t>(r)].owed != nullptr && width[static_cast<size_t>(r)] > 0) top_k(r, false);
  }
  // Greedy rows: the argmax.
  std::vector<int64_t> dropped;
  if (any_greedy) {
    std::vector<int64_t> next;
    if (!any_beam) {
      next = argmax_rows(logits, n, vocab);
    } else {
      next.assign(static_cast<size_t>(n), kEndId);
      for (int64_t r = 0; r < n; ++r)
        if (width[static_cast<size_t>(r)] == 0) {
          ops::cpu::ArgmaxParams p{logits + r * vocab, &next[static_cast<size_t>(r)], 1, vocab, vocab};
          ops::cpu::argmax_rows(p);
        }
    }
    for (int64_t r = 0; r < n; ++r) {
      const size_t i = static_cast<size_t>(r);
      if (width[i] > 0) continue;
      const Sentence& s = *sentence_of[i];
      Row& row = rows_[i];
      if (next[i] != kEndId) row.out.push_back(next[i]);
      row.next = next[i];
      if (next[i] == kEndId || static_cast<int64_t>(row.out.size()) >= s.limit) {
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
      if (width[static_cast<size_t>(r)] > 0) rows_of[rows_[static_cast<size_t>(r)].sentence].push_back(r);
    for (auto& [s, rows] : rows_of) {
      std::sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) {
        return rows_[static_cast<size_t>(a)].rank < rows_[static_cast<size_t>(b)].rank;
      });
      select_beam(s, rows, vocab, dropped, finished);
    }
  }
  // From the back: the row moved into a dropped one's slot is not dropped
  // (dropped rows behind it were removed first).
  std::sort(dropped.begin(), dropped.end());
  for (auto it = dropped.rbegin(); it != dropped.rend(); ++it) remove(*it);
  return finished;
}

void run_search(Search& search, SearchFeed& feed) {
  const DecodeOptions& options = search.options();
  for (;;) {
    // Each step is a safe point; the last sentences of a long input can
    // take many steps after the last join.
    if (options.stop_on_interrupt) {
      test_hold("decode-step", /*until_signal=*/true);
      throw_if_interrupted();
    }
    if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) throw Cancelled();
    const bool more = feed.join(search);
    if (search.rows() > 0) feed.ended(search.step());
    else if (!more) return;
  }
}

}  // namespace nmt::runtime
