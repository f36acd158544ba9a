// Sentence pairs in memory (validation and test sets: small, read as text),
// batch plans over any TokenPairs (data/token_pairs.h), and teacher-forcing
// batches. Training corpora are prepared once into shards (data/prepare.h).
#pragma once

#include <torch/nn.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "data/text_io.h"
#include "data/token_pairs.h"

namespace nmt {

class Tokenizer;

struct ParallelCorpus : TokenPairs {
  std::vector<std::vector<int64_t>> src;  // token ids, no specials
  std::vector<std::vector<int64_t>> tgt;  // token ids, no specials
  std::vector<std::string> src_text, tgt_text;
  int64_t skipped = 0;        // pairs dropped for exceeding max_len
  int64_t skipped_empty = 0;  // pairs dropped for an empty side

  int64_t size() const override { return static_cast<int64_t>(src.size()); }
  int64_t src_length(int64_t i) const override { return static_cast<int64_t>(src[i].size()); }
  int64_t tgt_length(int64_t i) const override { return static_cast<int64_t>(tgt[i].size()); }
  void src_ids(int64_t i, int64_t* out) const override { std::copy(src[i].begin(), src[i].end(), out); }
  void tgt_ids(int64_t i, int64_t* out) const override { std::copy(tgt[i].begin(), tgt[i].end(), out); }
};

// Loads line-aligned files; InputError when their line counts differ.
// max_len <= 0 keeps everything. protect_placeholders: the token ids are
// those of the masked lines (data/placeholder_mask.h); the texts stay as read.
ParallelCorpus load_parallel(const std::string& src_path, const std::string& tgt_path,
                             const Tokenizer& src_tok, const Tokenizer& tgt_tok, int64_t max_len,
                             bool protect_placeholders = false);

// The first max_n pairs (all when max_n <= 0).
ParallelCorpus head(const ParallelCorpus& corpus, int64_t max_n);

struct Batch {
  torch::Tensor src;          // src: [B, S] ids, right-padded with <pad>
  torch::Tensor src_lengths;  // src_lengths: [B]
  torch::Tensor tgt_in;       // tgt_in: [B, T] = <start> y1..yn (padded)
  torch::Tensor tgt_out;      // tgt_out: [B, T] = y1..yn <end> (padded)
  torch::Tensor tgt_lengths;  // tgt_lengths: [B] = n + 1
  int64_t tokens = 0;         // non-pad target tokens (n + 1 per pair)
  int64_t src_tokens = 0;     // non-pad source tokens

  Batch to(const torch::Device& device) const;
};

// Teacher forcing: labels are the decoder input shifted left by one.
// pairs: indices into `corpus`, one per row.
Batch make_batch(const TokenPairs& corpus, const std::vector<int64_t>& pairs);

// Source-only batch for decoding: src [B, S] and src_lengths [B].
std::pair<torch::Tensor, torch::Tensor> make_source_batch(
    const std::vector<std::vector<int64_t>>& sources);

// One epoch's batches, flat: 4 bytes a pair (a corpus has fewer than 2^32).
struct BatchPlan {
  std::vector<uint32_t> pairs;   // every pair once, batch after batch
  std::vector<uint64_t> starts;  // batch b is pairs[starts[b], starts[b + 1])

  size_t size() const { return starts.empty() ? 0 : starts.size() - 1; }
  std::vector<int64_t> operator[](size_t b) const {
    return {pairs.begin() + static_cast<std::ptrdiff_t>(starts[b]), pairs.begin() + static_cast<std::ptrdiff_t>(starts[b + 1])};
  }
  bool operator==(const BatchPlan& o) const { return pairs == o.pairs && starts == o.starts; }
};

// One epoch's batches: pairs sorted by length (random tie order) so batches
// carry little padding, cut by a token or sentence budget, batch order
// shuffled. Reads only the lengths. Deterministic for a given rng state.
BatchPlan plan_batches(const TokenPairs& corpus, int64_t batch_tokens, int64_t batch_sentences, std::mt19937_64& rng);

}  // namespace nmt
