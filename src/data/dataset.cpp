#include "data/dataset.h"

#include <algorithm>
#include <numeric>

#include "data/placeholder_mask.h"
#include "data/text_io.h"
#include "tokenizer/special_ids.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"

namespace nmt {

ParallelCorpus load_parallel(const std::string& src_path, const std::string& tgt_path,
                             const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                             int64_t max_len, bool protect_placeholders) {
  auto [src, tgt] = read_parallel_text(src_path, tgt_path);
  ParallelCorpus corpus;
  for (size_t i = 0; i < src.size(); ++i) {
    const auto [source, target] = data::model_pair(src[i], tgt[i], protect_placeholders);
    std::vector<int64_t> s = src_tok.encode(source);
    std::vector<int64_t> t = tgt_tok.encode(target);
    if (s.empty() || t.empty()) {
      ++corpus.skipped_empty;
      continue;
    }
    // +1: the decoder sees <start> y1..yn and predicts y1..yn <end>.
    if (max_len > 0 &&
        (static_cast<int64_t>(s.size()) > max_len || static_cast<int64_t>(t.size()) + 1 > max_len)) {
      ++corpus.skipped;
      continue;
    }
    corpus.src.push_back(std::move(s));
    corpus.tgt.push_back(std::move(t));
    corpus.src_text.push_back(std::move(src[i]));
    corpus.tgt_text.push_back(std::move(tgt[i]));
  }
  if (corpus.src.empty())
    throw InputError(src_path + ": no usable pair (" + std::to_string(corpus.skipped_empty) +
                     " with an empty side, " + std::to_string(corpus.skipped) +
                     " longer than data.max_len " + std::to_string(max_len) + ")");
  return corpus;
}

ParallelCorpus head(const ParallelCorpus& c, int64_t max_n) {
  if (max_n <= 0 || max_n >= static_cast<int64_t>(c.src.size())) return c;
  ParallelCorpus s;
  s.src.assign(c.src.begin(), c.src.begin() + max_n);
  s.tgt.assign(c.tgt.begin(), c.tgt.begin() + max_n);
  s.src_text.assign(c.src_text.begin(), c.src_text.begin() + max_n);
  s.tgt_text.assign(c.tgt_text.begin(), c.tgt_text.begin() + max_n);
  return s;
}

Batch Batch::to(const torch::Device& device) const {
  Batch b = *this;
  b.src = src.to(device), b.src_lengths = src_lengths.to(device);
  b.tgt_in = tgt_in.to(device), b.tgt_out = tgt_out.to(device);
  b.tgt_lengths = tgt_lengths.to(device);
  return b;
}

std::pair<torch::Tensor, torch::Tensor> make_source_batch(
    const std::vector<std::vector<int64_t>>& sources) {
  const int64_t n = static_cast<int64_t>(sources.size());
  int64_t s_max = 1;
  for (const auto& s : sources) s_max = std::max<int64_t>(s_max, s.size());
  torch::Tensor src = torch::full({n, s_max}, kPadId, torch::kLong);
  torch::Tensor len = torch::empty({n}, torch::kLong);
  auto src_a = src.accessor<int64_t, 2>();
  for (int64_t b = 0; b < n; ++b) {
    const auto& s = sources[b];
    for (size_t t = 0; t < s.size(); ++t) src_a[b][t] = s[t];
    len[b] = static_cast<int64_t>(s.size());
  }
  return {src, len};
}

Batch make_batch(const ParallelCorpus& corpus, const std::vector<int64_t>& indices) {
  const int64_t n = static_cast<int64_t>(indices.size());
  std::vector<std::vector<int64_t>> sources;
  int64_t t_max = 1;
  for (int64_t i : indices) {
    sources.push_back(corpus.src[i]);
    t_max = std::max<int64_t>(t_max, corpus.tgt[i].size() + 1);
  }
  Batch b;
  std::tie(b.src, b.src_lengths) = make_source_batch(sources);
  b.tgt_in = torch::full({n, t_max}, kPadId, torch::kLong);
  b.tgt_out = torch::full({n, t_max}, kPadId, torch::kLong);
  b.tgt_lengths = torch::empty({n}, torch::kLong);
  auto in_a = b.tgt_in.accessor<int64_t, 2>();
  auto out_a = b.tgt_out.accessor<int64_t, 2>();
  for (int64_t r = 0; r < n; ++r) {
    const auto& y = corpus.tgt[indices[r]];
    const int64_t len = static_cast<int64_t>(y.size());
    in_a[r][0] = kStartId;                                 // <start> y1 .. yn
    for (int64_t t = 0; t < len; ++t) in_a[r][t + 1] = y[t];
    for (int64_t t = 0; t < len; ++t) out_a[r][t] = y[t];  // y1 .. yn <end>
    out_a[r][len] = kEndId;
    b.tgt_lengths[r] = len + 1;
    b.tokens += len + 1;
    b.src_tokens += static_cast<int64_t>(corpus.src[indices[r]].size());
  }
  return b;
}

std::vector<std::vector<int64_t>> plan_batches(const ParallelCorpus& corpus, int64_t batch_tokens,
                                               int64_t batch_sentences, std::mt19937_64& rng) {
  const int64_t n = static_cast<int64_t>(corpus.src.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::make_pair(corpus.tgt[a].size(), corpus.src[a].size()) <
           std::make_pair(corpus.tgt[b].size(), corpus.src[b].size());
  });
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> cur;
  int64_t s_max = 0, t_max = 0;
  for (int64_t i : order) {
    const int64_t s = std::max<int64_t>(s_max, corpus.src[i].size());
    const int64_t t = std::max<int64_t>(t_max, corpus.tgt[i].size() + 1);
    const int64_t rows = static_cast<int64_t>(cur.size()) + 1;
    // Budget counts padded positions, which is what the compute pays for.
    const bool full = batch_tokens > 0 ? rows * (s + t) > batch_tokens : rows > batch_sentences;
    if (full && !cur.empty()) {
      batches.push_back(std::move(cur));
      cur.clear();
      s_max = t_max = 0;
    }
    cur.push_back(i);
    s_max = std::max<int64_t>(s_max, corpus.src[i].size());
    t_max = std::max<int64_t>(t_max, corpus.tgt[i].size() + 1);
  }
  if (!cur.empty()) batches.push_back(std::move(cur));
  std::shuffle(batches.begin(), batches.end(), rng);
  return batches;
}

}  // namespace nmt
