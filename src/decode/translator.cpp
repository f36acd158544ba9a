#include "decode/translator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "data/dataset.h"
#include "tokenizer/tokenizer.h"
#include "util/interrupt.h"

namespace nmt {

namespace {

// Next-token logits for every row, given the tokens fed so far.
class StepModel {
 public:
  StepModel(Transformer& model, const torch::Tensor& memory, const torch::Tensor& src_len,
            bool use_cache, int64_t max_steps)
      : model_(model), memory_(memory), src_len_(src_len), use_cache_(use_cache) {
    if (use_cache_) cache_ = model_->start_decoding(memory, src_len, max_steps);
  }

  // prefix: [N, t] = <start> y1 .. y(t-1) -> logits [N, V] for y_t.
  torch::Tensor next(const torch::Tensor& prefix) {
    if (use_cache_) return model_->decode_step(prefix.select(1, prefix.size(1) - 1), cache_);
    // Full recomputation; causality makes the last row depend on the prefix only.
    const torch::Tensor lengths = torch::full({prefix.size(0)}, prefix.size(1), src_len_.options());
    return model_->decode_embedded(model_->embed_target(prefix), memory_, lengths, src_len_)
        .select(1, prefix.size(1) - 1);
  }

  void reorder(const torch::Tensor& index) {
    // With the cache, the encoder output lives on only as the cached
    // cross-attention keys/values, which the cache reorders itself.
    if (use_cache_) {
      cache_.reorder(index);
      return;
    }
    memory_ = memory_.index_select(0, index);
    src_len_ = src_len_.index_select(0, index);
  }

 private:
  Transformer& model_;
  torch::Tensor memory_, src_len_;
  bool use_cache_;
  DecoderCache cache_;
};

std::vector<std::vector<int64_t>> greedy(StepModel& step, int64_t n, int64_t limit,
                                         const c10::Device& device) {
  std::vector<std::vector<int64_t>> out(n);
  // ys: [N, t]; rows that ended keep being extended, their tokens ignored.
  torch::Tensor ys = torch::full({n, 1}, kStartId, torch::TensorOptions(torch::kLong).device(device));
  std::vector<bool> done(n, false);
  int64_t remaining = n;
  for (int64_t t = 0; t < limit && remaining > 0; ++t) {
    const torch::Tensor next = step.next(ys).argmax(-1);  // [N]
    const torch::Tensor next_cpu = next.to(torch::kCPU);
    const int64_t* ids = next_cpu.data_ptr<int64_t>();
    for (int64_t b = 0; b < n; ++b) {
      if (done[b]) continue;
      if (ids[b] == kEndId) {
        done[b] = true, --remaining;
      } else {
        out[b].push_back(ids[b]);
      }
    }
    ys = torch::cat({ys, next.unsqueeze(1)}, 1);
  }
  return out;
}

double length_norm(double alpha, size_t len) {
  return alpha == 0.0 ? 1.0 : std::pow((5.0 + static_cast<double>(len)) / 6.0, alpha);
}

// Batched beam search. Rows are sentence-major: row n*K + k is beam k of
// sentence n. Every step each sentence keeps its K best hypotheses by
// log-probability: beams that have ended compete unchanged with the
// extensions of the live ones. A sentence stops when all its beams have
// ended; the length penalty only picks among them at the end, so an early,
// unlikely <end> cannot crowd out a better hypothesis still being written.
std::vector<std::vector<int64_t>> beam_search(StepModel& step, int64_t n, int64_t k,
                                              double alpha, int64_t limit,
                                              const c10::Device& device) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const auto long_opts = torch::TensorOptions(torch::kLong).device(device);
  step.reorder(torch::arange(n, long_opts).repeat_interleave(k));
  struct Beam {
    std::vector<int64_t> tokens;  // without <start> and <end>
    double score = kNegInf;       // log-probability, <end> included once ended
    bool ended = false;
  };
  std::vector<Beam> beams(n * k);
  for (int64_t s = 0; s < n; ++s) beams[s * k].score = 0.0;  // one start per sentence
  const auto sentence_done = [&](int64_t s) {
    for (int64_t j = 0; j < k; ++j)
      if (!beams[s * k + j].ended && beams[s * k + j].score != kNegInf) return false;
    return true;
  };
  torch::Tensor ys = torch::full({n * k, 1}, kStartId, long_opts);

  for (int64_t t = 0; t < limit; ++t) {
    torch::Tensor logp = torch::log_softmax(step.next(ys).to(torch::kDouble), -1).to(torch::kCPU);
    const int64_t vocab = logp.size(1);
    std::vector<double> base(n * k);
    for (int64_t r = 0; r < n * k; ++r) base[r] = beams[r].ended ? kNegInf : beams[r].score;
    // Extensions of live beams only: [N, K*V].
    const torch::Tensor cand =
        (torch::tensor(base, torch::kDouble).unsqueeze(1) + logp).view({n, k * vocab});
    const auto [top_v, top_i] = cand.topk(std::min<int64_t>(k, k * vocab), 1);
    const auto tv = top_v.accessor<double, 2>();
    const auto ti = top_i.accessor<int64_t, 2>();

    std::vector<Beam> next(n * k);
    std::vector<int64_t> parent(n * k), token(n * k, kEndId);
    for (int64_t s = 0; s < n; ++s) {
      // Merge the ended beams (kept as they are) with the best extensions.
      struct Pick { double score; int64_t from; int64_t tok; };  // tok < 0: carried ended beam
      std::vector<Pick> picks;
      for (int64_t j = 0; j < k; ++j) {
        const Beam& b = beams[s * k + j];
        if (b.ended && b.score != kNegInf) picks.push_back({b.score, s * k + j, -1});
      }
      for (int64_t r = 0; r < top_v.size(1); ++r)
        if (tv[s][r] != kNegInf) picks.push_back({tv[s][r], s * k + ti[s][r] / vocab, ti[s][r] % vocab});
      std::stable_sort(picks.begin(), picks.end(),
                       [](const Pick& a, const Pick& b) { return a.score > b.score; });
      for (int64_t j = 0; j < k; ++j) {
        const int64_t row = s * k + j;
        parent[row] = s * k;  // rows without a pick stay dead (score -inf)
        if (j >= static_cast<int64_t>(picks.size())) continue;
        const Pick& pk = picks[j];
        parent[row] = pk.from;
        next[row] = beams[pk.from];
        next[row].score = pk.score;
        if (pk.tok == kEndId) next[row].ended = true;
        else if (pk.tok >= 0) next[row].tokens.push_back(pk.tok), token[row] = pk.tok;
      }
    }
    beams = std::move(next);
    bool all_done = true;
    for (int64_t s = 0; s < n && all_done; ++s) all_done = sentence_done(s);
    if (all_done) break;
    const torch::Tensor index = torch::tensor(parent, torch::kLong).to(device);
    step.reorder(index);
    ys = torch::cat({ys.index_select(0, index),
                     torch::tensor(token, torch::kLong).to(device).unsqueeze(1)}, 1);
  }
  std::vector<std::vector<int64_t>> out(n);
  for (int64_t s = 0; s < n; ++s) {
    double best = kNegInf;
    for (int64_t j = 0; j < k; ++j) {
      const Beam& b = beams[s * k + j];
      if (b.score == kNegInf) continue;
      // GNMT: log P / ((5 + |Y|) / 6)^alpha, |Y| counting <end> when present.
      const double norm = b.score / length_norm(alpha, b.tokens.size() + (b.ended ? 1 : 0));
      if (norm > best) best = norm, out[s] = b.tokens;
    }
  }
  return out;
}

}  // namespace

DecodeOptions decode_options(const DecodeConfig& config) {
  DecodeOptions o;
  o.max_len = config.max_len;
  o.batch_size = config.batch_size;
  return o;
}

std::vector<std::vector<int64_t>> decode(Transformer& model,
                                         const std::vector<std::vector<int64_t>>& sources,
                                         const DecodeOptions& options, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(sources.size());
  if (n == 0) return {};
  auto [src, src_len] = make_source_batch(sources);
  src = src.to(device), src_len = src_len.to(device);
  const torch::Tensor memory = model->encode(src, src_len);  // [N, S, C]
  const int64_t limit = std::min(options.max_len, model->options().max_positions() - 1);
  StepModel step(model, memory, src_len, options.use_cache, limit);
  if (options.beam <= 0) return greedy(step, n, limit, device);
  return beam_search(step, n, options.beam, options.length_penalty, limit, device);
}

std::vector<std::string> translate_lines(Transformer& model, const Tokenizer& src_tok,
                                         const Tokenizer& tgt_tok,
                                         const std::vector<std::string>& lines,
                                         const DecodeOptions& options, const c10::Device& device) {
  std::vector<std::string> result(lines.size());
  std::vector<std::vector<int64_t>> encoded(lines.size());
  std::vector<size_t> order;
  for (size_t i = 0; i < lines.size(); ++i) {
    encoded[i] = src_tok.encode(lines[i]);
    // Clip over-long input to what the position table covers.
    if (static_cast<int64_t>(encoded[i].size()) > model->options().max_positions())
      encoded[i].resize(model->options().max_positions());
    if (!encoded[i].empty()) order.push_back(i);
  }
  // Similar lengths together: less padding, same results (padding is masked).
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return encoded[a].size() < encoded[b].size(); });
  const size_t batch = static_cast<size_t>(std::max<int64_t>(1, options.batch_size));
  for (size_t start = 0; start < order.size(); start += batch) {
    throw_if_interrupted();  // a safe point: nothing half-done to undo
    const size_t end = std::min(order.size(), start + batch);
    std::vector<std::vector<int64_t>> sources;
    for (size_t k = start; k < end; ++k) sources.push_back(encoded[order[k]]);
    const auto hyps = decode(model, sources, options, device);
    for (size_t k = start; k < end; ++k) result[order[k]] = tgt_tok.decode(hyps[k - start]);
  }
  return result;
}

}  // namespace nmt
