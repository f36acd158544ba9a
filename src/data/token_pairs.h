// Sentence pairs as token ids, the way training reads them: the lengths
// alone (a batch plan needs nothing else), and the ids of one pair at a time.
// ParallelCorpus (data/dataset.h) holds them in memory; data::PreparedCorpus
// (data/shards.h) reads them from memory-mapped shards. Plain C++17.
#pragma once

#include <cstdint>

namespace nmt {

class TokenPairs {
 public:
  virtual ~TokenPairs() = default;
  virtual int64_t size() const = 0;
  virtual int64_t src_length(int64_t i) const = 0;  // tokens, no specials
  virtual int64_t tgt_length(int64_t i) const = 0;
  // Writes pair i's ids: src_length(i) of them, and tgt_length(i).
  virtual void src_ids(int64_t i, int64_t* out) const = 0;
  virtual void tgt_ids(int64_t i, int64_t* out) const = 0;
};

}  // namespace nmt
