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

Batch make_batch(const TokenPairs& corpus, const std::vector<int64_t>& pairs) {
  const int64_t n = static_cast<int64_t>(pairs.size());
  int64_t s_max = 1, t_max = 1;
  for (const int64_t i : pairs) {
    s_max = std::max(s_max, corpus.src_length(i));
    t_max = std::max(t_max, corpus.tgt_length(i) + 1);
  }
  Batch b;
  b.src = torch::full({n, s_max}, kPadId, torch::kLong);
  b.src_lengths = torch::empty({n}, torch::kLong);
  b.tgt_in = torch::full({n, t_max}, kPadId, torch::kLong);
  b.tgt_out = torch::full({n, t_max}, kPadId, torch::kLong);
  b.tgt_lengths = torch::empty({n}, torch::kLong);
  int64_t* src = b.src.data_ptr<int64_t>();
  int64_t* in = b.tgt_in.data_ptr<int64_t>();
  int64_t* out = b.tgt_out.data_ptr<int64_t>();
  int64_t* src_len = b.src_lengths.data_ptr<int64_t>();
  int64_t* tgt_len = b.tgt_lengths.data_ptr<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t i = pairs[static_cast<size_t>(r)];
    const int64_t s = corpus.src_length(i), len = corpus.tgt_length(i);
    corpus.src_ids(i, src + r * s_max);
    src_len[r] = s;
    in[r * t_max] = kStartId;                   // <start> y1 .. yn
    corpus.tgt_ids(i, in + r * t_max + 1);
    std::copy(in + r * t_max + 1, in + r * t_max + 1 + len, out + r * t_max);  // y1 .. yn <end>
    out[r * t_max + len] = kEndId;
    tgt_len[r] = len + 1;
    b.tokens += len + 1;
    b.src_tokens += s;
  }
  return b;
}

BatchPlan plan_batches(const TokenPairs& corpus, int64_t batch_tokens, int64_t batch_sentences, std::mt19937_64& rng) {
  const int64_t n = corpus.size();
  if (n >= (int64_t{1} << 32)) throw InputError("a corpus of " + std::to_string(n) + " pairs: at most 2^32 - 1");
  std::vector<uint32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  // Stable by (target length, source length): a counting sort over the
  // lengths when they are short (always, for a prepared corpus), which is
  // what std::stable_sort gives, in one pass instead of n log n compares.
  int64_t max_s = 0, max_t = 0;
  for (int64_t i = 0; i < n; ++i) max_s = std::max(max_s, corpus.src_length(i)), max_t = std::max(max_t, corpus.tgt_length(i));
  const auto key = [&](uint32_t i) { return corpus.tgt_length(i) * (max_s + 1) + corpus.src_length(i); };
  if ((max_t + 1) * (max_s + 1) <= (int64_t{1} << 24)) {
    std::vector<uint64_t> at(static_cast<size_t>((max_t + 1) * (max_s + 1) + 1), 0);
    for (const uint32_t i : order) ++at[static_cast<size_t>(key(i)) + 1];
    for (size_t k = 1; k < at.size(); ++k) at[k] += at[k - 1];
    std::vector<uint32_t> sorted(order.size());
    for (const uint32_t i : order) sorted[at[static_cast<size_t>(key(i))]++] = i;
    order.swap(sorted);
  } else {
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  }
  // Cut into batches by the budget. Budget counts padded positions, which is
  // what the compute pays for.
  std::vector<uint64_t> starts{0};
  int64_t rows = 0, s_max = 0, t_max = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t i = order[k];
    const int64_t s = std::max(s_max, corpus.src_length(i));
    const int64_t t = std::max(t_max, corpus.tgt_length(i) + 1);
    const bool full = batch_tokens > 0 ? (rows + 1) * (s + t) > batch_tokens : rows + 1 > batch_sentences;
    if (full && rows > 0) {
      starts.push_back(k);
      rows = s_max = t_max = 0;
    }
    ++rows;
    s_max = std::max(s_max, corpus.src_length(i));
    t_max = std::max(t_max, corpus.tgt_length(i) + 1);
  }
  if (rows > 0) starts.push_back(order.size());
  // The batch order shuffled, as std::shuffle would shuffle a list of batches.
  const size_t batches = starts.size() - 1;
  std::vector<size_t> perm(batches);
  std::iota(perm.begin(), perm.end(), size_t{0});
  std::shuffle(perm.begin(), perm.end(), rng);
  BatchPlan plan;
  plan.pairs.reserve(order.size());
  plan.starts.reserve(starts.size());
  plan.starts.push_back(0);
  for (const size_t b : perm) {
    plan.pairs.insert(plan.pairs.end(), order.begin() + static_cast<std::ptrdiff_t>(starts[b]),
                      order.begin() + static_cast<std::ptrdiff_t>(starts[b + 1]));
    plan.starts.push_back(plan.pairs.size());
  }
  return plan;
}

}  // namespace nmt
