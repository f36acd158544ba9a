#include "decode/decode.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "data/dataset.h"
#include "data/placeholders.h"
#include "decode/continuous_search.h"
#include "decode/length_limit.h"
#include "decode/placeholder_constraint.h"
#include "tokenizer/tokenizer.h"
#include "util/interrupt.h"
#include "util/test_hooks.h"
#include "util/thread_env.h"

namespace nmt {

namespace {

// Next-token logits for every row, given the newest token of each, by
// recomputing every row's whole prefix (no cache: the reference the running
// batch's cached steps are checked against). Rows can be dropped or
// duplicated between steps (reorder), so a batch shrinks as its sentences
// finish.
class RecomputingStep {
 public:
  RecomputingStep(Transformer& model, const torch::Tensor& memory, const torch::Tensor& src_len)
      : model_(model), memory_(memory), src_len_(src_len) {}

  // tokens: [N] = y(t-1) of every row (<start> first) -> logits [N, V] for y_t.
  torch::Tensor next(const torch::Tensor& tokens) {
    // Causality makes the last row depend on the prefix only.
    prefix_ = prefix_.defined() ? torch::cat({prefix_, tokens.unsqueeze(1)}, 1) : tokens.unsqueeze(1);
    const torch::Tensor lengths = torch::full({prefix_.size(0)}, prefix_.size(1), src_len_.options());
    return model_->decode_embedded(model_->embed_target(prefix_), memory_, lengths, src_len_)
        .select(1, prefix_.size(1) - 1);
  }

  // Keeps rows `index` ([N'] int64), in that order. same_sources: every kept
  // row comes from a row of the same sentence (beams choosing parents), so
  // only the target side moves.
  void reorder(const torch::Tensor& index, bool same_sources = false) {
    if (prefix_.defined()) prefix_ = prefix_.index_select(0, index);
    if (same_sources) return;
    memory_ = memory_.index_select(0, index);
    src_len_ = src_len_.index_select(0, index);
  }

 private:
  Transformer& model_;
  torch::Tensor memory_, src_len_;
  torch::Tensor prefix_;  // [N, t]: every token fed so far
};

// Drops finished rows from the batch once enough have piled up: each drop
// copies the caches, so not for every single row.
bool worth_compacting(size_t finished, size_t rows) { return finished > 0 && finished * 8 >= rows; }

// Batched beam search over a fixed batch, recomputing the prefix every step:
// the reference the running batch's search (ContinuousSearch, with the
// cache) is tested against, under the same rules (beam_rules). Rows are
// sentence-major: row g*K + k is beam k of the g-th sentence still in the
// batch. Every step each sentence keeps its K best hypotheses by
// log-probability: beams that have ended compete unchanged with the
// extensions of the live ones. A sentence stops when all its beams have ended
// (or reached its length limit), or no live one can beat its best ended one;
// the length penalty only picks among them at the end, so an early, unlikely
// <end> cannot crowd out a better hypothesis still being written. Finished
// sentences leave the batch. (One function of about 130 lines: the steps
// share the per-row bookkeeping, which helpers would have to pass around
// whole.)
std::vector<std::vector<int64_t>> beam_search(RecomputingStep& step, const std::vector<int64_t>& limits,
                                              int64_t k, double alpha, bool early_stop,
                                              const PlaceholderConstraint& constraint,
                                              const std::vector<std::vector<int64_t>>& owed,
                                              const c10::Device& device) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const int64_t n = static_cast<int64_t>(limits.size());
  const auto long_opts = torch::TensorOptions(torch::kLong).device(device);
  step.reorder(torch::arange(n, long_opts).repeat_interleave(k));
  struct Beam {
    std::vector<int64_t> tokens;  // without <start> and <end>
    double score = kNegInf;       // log-probability, <end> included when has_end
    bool ended = false;           // no further extension: <end> or the length limit
    bool has_end = false;
  };
  std::vector<Beam> beams(n * k);
  for (int64_t s = 0; s < n; ++s) beams[s * k].score = 0.0;  // one start per sentence
  std::vector<int64_t> sentence(n);  // the sentence of each group of K rows
  std::iota(sentence.begin(), sentence.end(), 0);
  const auto group_done = [&](int64_t g) {
    double best_ended = kNegInf, best_live = kNegInf;
    for (int64_t j = 0; j < k; ++j) {
      const Beam& b = beams[g * k + j];
      if (b.score == kNegInf) continue;
      if (b.ended) {
        best_ended = std::max(best_ended, beam_rules::normalized(b.score, b.tokens.size(), b.has_end, alpha));
      } else {
        best_live = std::max(best_live, b.score);
      }
    }
    return beam_rules::done(best_ended, best_live, limits[sentence[g]], alpha, early_stop);
  };
  std::vector<std::vector<int64_t>> out(n);
  const auto finish = [&](int64_t g) {
    double best = kNegInf;
    for (int64_t j = 0; j < k; ++j) {
      const Beam& b = beams[g * k + j];
      if (b.score == kNegInf || !b.ended) continue;
      const double norm = beam_rules::normalized(b.score, b.tokens.size(), b.has_end, alpha);
      if (norm > best) best = norm, out[sentence[g]] = b.tokens;
    }
  };
  torch::Tensor tokens = torch::full({n * k}, kStartId, long_opts);  // [rows]

  while (!sentence.empty()) {
    const int64_t groups = static_cast<int64_t>(sentence.size());
    const torch::Tensor logp = torch::log_softmax(step.next(tokens).to(torch::kDouble), -1).to(torch::kCPU);
    if (!owed.empty()) {  // on the log-probabilities: the scores stay the model's
      std::vector<PlaceholderConstraint::Row> rows(groups * k);
      for (int64_t r = 0; r < groups * k; ++r)
        if (!beams[r].ended && beams[r].score != kNegInf)
          rows[r] = {&owed[sentence[r / k]], &beams[r].tokens, limits[sentence[r / k]]};
      constraint.apply(logp, rows);
    }
    const int64_t vocab = logp.size(1);
    std::vector<double> base(groups * k);
    for (int64_t r = 0; r < groups * k; ++r) base[r] = beams[r].ended ? kNegInf : beams[r].score;
    // Extensions of live beams only: [G, K*V].
    const torch::Tensor cand =
        (torch::tensor(base, torch::kDouble).unsqueeze(1) + logp).view({groups, k * vocab});
    const auto [top_v, top_i] = cand.topk(std::min<int64_t>(k, k * vocab), 1);
    const auto tv = top_v.accessor<double, 2>();
    const auto ti = top_i.accessor<int64_t, 2>();

    std::vector<Beam> next(groups * k);
    std::vector<int64_t> parent(groups * k), token(groups * k, kEndId);
    for (int64_t g = 0; g < groups; ++g) {
      // Merge the ended beams (kept as they are) with the best extensions.
      struct Pick { double score; int64_t from; int64_t tok; };  // tok < 0: carried ended beam
      std::vector<Pick> picks;
      for (int64_t j = 0; j < k; ++j) {
        const Beam& b = beams[g * k + j];
        if (b.ended && b.score != kNegInf) picks.push_back({b.score, g * k + j, -1});
      }
      for (int64_t r = 0; r < top_v.size(1); ++r)
        if (tv[g][r] != kNegInf) picks.push_back({tv[g][r], g * k + ti[g][r] / vocab, ti[g][r] % vocab});
      std::stable_sort(picks.begin(), picks.end(),
                       [](const Pick& a, const Pick& b) { return a.score > b.score; });
      for (int64_t j = 0; j < k; ++j) {
        const int64_t row = g * k + j;
        parent[row] = g * k;  // rows without a pick stay dead (score -inf)
        if (j >= static_cast<int64_t>(picks.size())) continue;
        const Pick& pk = picks[j];
        parent[row] = pk.from;
        next[row] = beams[pk.from];
        next[row].score = pk.score;
        if (pk.tok == kEndId) {
          next[row].ended = next[row].has_end = true;
        } else if (pk.tok >= 0) {
          next[row].tokens.push_back(pk.tok), token[row] = pk.tok;
          if (static_cast<int64_t>(next[row].tokens.size()) >= limits[sentence[g]]) next[row].ended = true;
        }
      }
    }
    beams = std::move(next);
    std::vector<char> done(groups);
    int64_t done_groups = 0;
    for (int64_t g = 0; g < groups; ++g)
      if ((done[g] = group_done(g))) finish(g), ++done_groups;
    if (done_groups == groups) break;
    // Rows follow their parents; finished sentences leave once enough have.
    const bool compact = worth_compacting(done_groups, groups);
    std::vector<int64_t> index, kept_sentence;
    std::vector<Beam> kept_beams;
    for (int64_t g = 0; g < groups; ++g) {
      if (compact && done[g]) continue;
      kept_sentence.push_back(sentence[g]);
      for (int64_t j = 0; j < k; ++j) index.push_back(parent[g * k + j]);
    }
    if (compact) {
      for (int64_t g = 0; g < groups; ++g)
        if (!done[g])
          for (int64_t j = 0; j < k; ++j) kept_beams.push_back(std::move(beams[g * k + j]));
      std::vector<int64_t> kept_token;
      for (int64_t g = 0; g < groups; ++g)
        if (!done[g]) kept_token.insert(kept_token.end(), token.begin() + g * k, token.begin() + (g + 1) * k);
      beams = std::move(kept_beams);
      token = std::move(kept_token);
    }
    sentence = std::move(kept_sentence);
    step.reorder(torch::tensor(index, torch::kLong).to(device), /*same_sources=*/!compact);
    tokens = torch::tensor(token, torch::kLong).to(device);
  }
  return out;
}

}  // namespace

int64_t target_limit(const DecodeOptions& options, int64_t src_tokens) {
  if (options.max_len_factor <= 0) return options.max_len;
  const double bound = options.max_len_factor * static_cast<double>(src_tokens) + kLengthSlack;
  return std::max<int64_t>(1, std::min<int64_t>(options.max_len, static_cast<int64_t>(bound)));
}

int64_t decode_limit(const DecodeOptions& options, int64_t max_positions, int64_t src_tokens) {
  return std::min(target_limit(options, src_tokens), max_positions - 1);
}

bool reached_limit(const DecodeOptions& options, int64_t max_positions, int64_t src_tokens, int64_t hyp_tokens) {
  return src_tokens > 0 && hyp_tokens >= decode_limit(options, max_positions, src_tokens);
}

DecodeOptions decode_options(const Config& config, const Tokenizer* target, double corpus_ratio,
                             const std::string& factor_set_by) {
  return decode_options(config.decode, config.tokenizer.protect_placeholders, target, corpus_ratio, factor_set_by);
}

DecodeOptions decode_options(const DecodeConfig& decode, bool protect_placeholders, const Tokenizer* target,
                             double corpus_ratio, const std::string& factor_set_by) {
  DecodeOptions o;
  o.max_len = decode.max_len;
  const LengthFactor factor = resolve_length_factor(decode.max_len_factor, corpus_ratio, factor_set_by);
  o.max_len_factor = factor.factor;
  o.max_len_origin = factor.origin;
  o.batch_size = decode.batch_size;
  o.beam = decode.beam;
  o.length_penalty = decode.length_penalty;
  o.protect_placeholders = protect_placeholders;
  if (o.protect_placeholders && decode.placeholder_constraint && target)
    for (const std::string& s : data::sentinel_symbols()) o.sentinel_ids.push_back(target->piece_id(s));
  return o;
}

SourceText::SourceText(const std::string& line, const DecodeOptions& options)
    : line_(line), protect_(options.protect_placeholders) {
  if (!protect_) return;
  masked_ = data::mask_source(line);
  if (options.sentinel_ids.empty()) return;
  for (int k : data::sentinels_in(masked_.text))
    if (const int64_t id = options.sentinel_ids[static_cast<size_t>(k - 1)]; id >= 0) owed_.push_back(id);
}

std::string SourceText::finish(const std::string& translation) const {
  return protect_ ? data::restore_target(translation, masked_) : translation;
}

std::string SourceText::shown(const std::string& text) const {
  return protect_ ? data::show_sentinels(text, masked_) : text;
}

std::vector<std::vector<int64_t>> decode(Transformer& model,
                                         const std::vector<std::vector<int64_t>>& sources,
                                         const DecodeOptions& options, const c10::Device& device,
                                         const std::vector<std::vector<int64_t>>& owed) {
  torch::NoGradGuard no_grad;
  if (!owed.empty() && owed.size() != sources.size())
    throw std::invalid_argument("decode: owed sentinels for " + std::to_string(owed.size()) + " of " +
                                std::to_string(sources.size()) + " sources");
  // Empty sources give empty outputs; the others are decoded together.
  std::vector<std::vector<int64_t>> out(sources.size());
  std::vector<std::vector<int64_t>> todo, todo_owed;
  std::vector<size_t> index;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty()) continue;
    todo.push_back(sources[i]), index.push_back(i);
    if (!owed.empty()) todo_owed.push_back(owed[i]);
  }
  if (todo.empty()) return out;
  if (options.use_cache) {
    // Greedy and beam search have one loop, the running batch's
    // (ContinuousSearch): a fixed batch is a running batch that every
    // sentence joins at once.
    ContinuousSearch stream(model, options, device);
    std::vector<uint64_t> tickets(todo.size());
    std::iota(tickets.begin(), tickets.end(), 0);
    stream.add(todo, tickets, todo_owed);
    while (stream.rows() > 0)
      for (auto& [ticket, ids] : stream.step()) out[index[ticket]] = std::move(ids);
    return out;
  }
  const PlaceholderConstraint constraint(options.sentinel_ids);
  // Without sentinel ids, or with none owed and none to forbid, nothing to do.
  const std::vector<std::vector<int64_t>> none;
  const auto& quota = constraint.active() ? todo_owed : none;
  auto [src, src_len] = make_source_batch(todo);
  src = src.to(device), src_len = src_len.to(device);
  const torch::Tensor memory = model->encode(src, src_len);  // [N, S, C]
  std::vector<int64_t> limits(todo.size());
  for (size_t i = 0; i < todo.size(); ++i)
    limits[i] = decode_limit(options, model->options().max_positions(), static_cast<int64_t>(todo[i].size()));
  RecomputingStep step(model, memory, src_len);
  // Without the cache (the prefix recomputed every step, kept to check the
  // running batch against): beam search, one beam for greedy.
  const auto hyps = beam_search(step, limits, std::max<int64_t>(1, options.beam), options.length_penalty,
                                options.beam_early_stop, constraint, quota, device);
  for (size_t i = 0; i < hyps.size(); ++i) out[index[i]] = hyps[i];
  return out;
}

int64_t fit_source(std::vector<int64_t>& ids, const Transformer& model) {
  const int64_t tokens = static_cast<int64_t>(ids.size());
  const int64_t limit = model->options().max_positions();
  if (tokens > limit) ids.resize(static_cast<size_t>(limit));
  return tokens;
}

std::string describe_cuts(const std::vector<SourceCut>& cuts, int64_t limit, int64_t first_line) {
  constexpr size_t kNamed = 10;
  std::string out = std::to_string(cuts.size()) + (cuts.size() == 1 ? " source" : " sources") +
                    " longer than the " + std::to_string(limit) + " tokens this model reads " +
                    (cuts.size() == 1 ? "was" : "were") + " cut to the first " + std::to_string(limit) + ":";
  for (size_t i = 0; i < cuts.size() && i < kNamed; ++i)
    out += std::string(i ? "," : "") + " line " + std::to_string(first_line + static_cast<int64_t>(cuts[i].line)) +
           " (" + std::to_string(cuts[i].tokens) + " tokens)";
  if (cuts.size() > kNamed) out += ", and " + std::to_string(cuts.size() - kNamed) + " more";
  return out;
}

PreparedLine prepare_line(const std::string& line, const Tokenizer& src_tok, const Transformer& model,
                          const DecodeOptions& options) {
  PreparedLine p{SourceText(line, options), {}, 0};
  p.ids = src_tok.encode(p.text.text());
  p.read_tokens = fit_source(p.ids, model);
  return p;
}

AttentionMaps translation_attention(Transformer& model, const std::vector<int64_t>& src,
                                    const std::vector<int64_t>& hyp, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> tgt_in{kStartId};
  tgt_in.insert(tgt_in.end(), hyp.begin(), hyp.end());
  auto [src_t, src_len] = make_source_batch({src});
  const auto long_opts = torch::TensorOptions(torch::kLong).device(device);
  const torch::Tensor tgt_t = torch::tensor(tgt_in, long_opts).unsqueeze(0);
  return model->attention_maps(src_t.to(device), src_len.to(device), tgt_t,
                               torch::full({1}, tgt_t.size(1), long_opts));
}

TranslationBatch translate_lines(Transformer& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                                 const std::vector<std::string>& lines, const DecodeOptions& options,
                                 const c10::Device& device) {
  TranslationBatch out;
  out.sources.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    out.sources.push_back(prepare_line(lines[i], src_tok, model, options));
    if (out.sources.back().was_cut()) out.cuts.push_back({i, out.sources.back().read_tokens});
  }
  out.ids = decode_lines(model, out.sources, options, device);
  out.translations.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    out.translations.push_back(finish_translation(out.sources[i], out.ids[i], tgt_tok));
    if (reached_limit(out.sources[i], out.ids[i], options, model)) out.length_limited.push_back(i);
    if (auto missing = data::missing_placeholders(lines[i], out.translations[i]); !missing.empty())
      out.placeholders_lost.push_back({i, std::move(missing)});
  }
  return out;
}

std::string describe_lost_placeholders(const std::vector<LostPlaceholders>& lost, size_t count,
                                       bool protect_placeholders, int64_t first_line) {
  constexpr size_t kNamed = 5;
  std::string out = std::to_string(lost.size()) + " of " + std::to_string(count) +
                    (count == 1 ? " translation" : " translations") +
                    " lost placeholders of their source, which breaks a program that prints them:";
  for (size_t i = 0; i < lost.size() && i < kNamed; ++i) {
    std::string which;
    for (const std::string& p : lost[i].missing) which += (which.empty() ? "" : ", ") + p;
    out += std::string(i ? "," : "") + " line " + std::to_string(first_line + static_cast<int64_t>(lost[i].line)) +
           " (" + which + ")";
  }
  if (lost.size() > kNamed) out += ", and " + std::to_string(lost.size() - kNamed) + " more";
  return out + (protect_placeholders
                    ? " (decode.placeholder_constraint makes a protected model write every one)"
                    : "; this model does not protect placeholders (tokenizer.protect_placeholders: false): one trained "
                      "with it keeps them (docs/placeholders.md)");
}

bool reached_limit(const PreparedLine& line, const std::vector<int64_t>& hyp, const DecodeOptions& options,
                   const Transformer& model) {
  return reached_limit(options, model->options().max_positions(), static_cast<int64_t>(line.ids.size()),
                       static_cast<int64_t>(hyp.size()));
}

std::string finish_translation(const PreparedLine& line, const std::vector<int64_t>& hyp, const Tokenizer& tgt_tok) {
  return line.ids.empty() ? std::string() : line.text.finish(tgt_tok.decode(hyp));
}

std::vector<std::vector<int64_t>> decode_lines(Transformer& model, const std::vector<PreparedLine>& lines,
                                               const DecodeOptions& options, const c10::Device& device) {
  std::vector<std::vector<int64_t>> result(lines.size());
  std::vector<size_t> order;
  for (size_t i = 0; i < lines.size(); ++i)
    if (!lines[i].ids.empty()) order.push_back(i);
  // Similar lengths together: less padding, same results (padding is masked).
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lines[a].ids.size() < lines[b].ids.size(); });
  const size_t batch = static_cast<size_t>(std::max<int64_t>(1, options.batch_size));
  const size_t batches = (order.size() + batch - 1) / batch;
  const auto finish = [&](size_t line, std::vector<int64_t> ids) { result[line] = std::move(ids); };
  // Without the cache: fixed batches; batch b decoded, then its lines' ids
  // put in their places.
  std::atomic<size_t> next_batch{0};
  const auto run_batches = [&] {
    for (size_t b; (b = next_batch++) < batches;) {
      if (options.stop_on_interrupt) {
        test_hold("decode-step", /*until_signal=*/true);
        throw_if_interrupted();  // a safe point: nothing half-done to undo
      }
      const size_t start = b * batch, end = std::min(order.size(), start + batch);
      std::vector<std::vector<int64_t>> sources, owed;
      for (size_t k = start; k < end; ++k) {
        sources.push_back(lines[order[k]].ids);
        if (!options.sentinel_ids.empty()) owed.push_back(lines[order[k]].text.owed());
      }
      const auto hyps = decode(model, sources, options, device, owed);
      for (size_t k = start; k < end; ++k) finish(order[k], hyps[k - start]);
    }
  };
  // With the cache: a running batch of up to `batch` sentences
  // (ContinuousSearch, greedy or beam) that takes the next lines in length order as its
  // sentences end, a quarter of a batch at a time. Fixed batches spend their
  // last steps on the few sentences still going (often to the length limit),
  // and a step of a few rows costs nearly a full pass over the weights. Each
  // sentence gets the tokens decode() gives it.
  std::atomic<size_t> next_line{0};
  const bool continuous = options.use_cache;
  const int64_t longest = order.empty() ? 0 : static_cast<int64_t>(lines[order.back()].ids.size());
  // The running batches take the longest lines first: the input's last
  // steps, where a worker may be left decoding alone while the others have
  // run out of lines, are then the short lines' (longest first, as in
  // scheduling jobs on several machines).
  if (continuous) std::reverse(order.begin(), order.end());
  const auto run_stream = [&] {
    ContinuousSearch stream(model, options, device);
    stream.plan(static_cast<int64_t>(batch) * std::max<int64_t>(1, options.beam), longest);
    const size_t refill = std::max<size_t>(1, batch / 4);
    for (bool more = true;;) {
      // Each step is a safe point; the last sentences of a long input can
      // take many steps after the last refill.
      if (options.stop_on_interrupt) {
        test_hold("decode-step", /*until_signal=*/true);
        throw_if_interrupted();
      }
      const size_t room = batch - static_cast<size_t>(stream.sentences());
      if (more && (room >= refill || stream.sentences() == 0)) {
        const size_t start = std::min(order.size(), next_line.fetch_add(room));
        const size_t end = std::min(order.size(), start + room);
        more = end < order.size();
        std::vector<std::vector<int64_t>> sources, owed;
        std::vector<uint64_t> tickets;
        for (size_t k = start; k < end; ++k) {
          sources.push_back(lines[order[k]].ids), tickets.push_back(order[k]);
          if (!options.sentinel_ids.empty()) owed.push_back(lines[order[k]].text.owed());
        }
        stream.add(sources, tickets, owed);
      }
      if (stream.rows() == 0) break;
      for (auto& [line, ids] : stream.step()) finish(static_cast<size_t>(line), std::move(ids));
    }
  };
  const auto work = [&] { continuous ? run_stream() : run_batches(); };
  const int intra = at::get_num_threads();
  size_t workers = options.parallel_batches > 0 ? static_cast<size_t>(options.parallel_batches)
                                                : static_cast<size_t>(intra);
  workers = device.is_cpu() ? std::min(workers, batches) : 1;
  if (workers <= 1) {
    work();
    return result;
  }
  // Each worker's ops run on its own thread only (OpenMP's thread count is
  // per thread, OpenBLAS's is global and restored after).
  std::exception_ptr failure;
  std::mutex failure_mutex;
  set_blas_threads(1);
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      at::set_num_threads(1);
      try {
        work();
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next_batch = batches, next_line = order.size();  // the others stop taking work
      }
    });
  for (auto& t : pool) t.join();
  at::set_num_threads(intra);
  set_blas_threads(intra);
  if (failure) std::rethrow_exception(failure);
  return result;
}

}  // namespace nmt
