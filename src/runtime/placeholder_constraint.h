// Constrained decoding for protected placeholders (tokenizer.protect_placeholders,
// data/placeholder_mask.h). A model trained on sentinels learns to place
// them, but nothing in its training forbids dropping one or writing one
// twice, and a translation that loses the source's "%s" breaks the program
// that prints it. So while decoding, for every hypothesis:
//   - a sentinel its source lacks, or one already written as often as the
//     source has it, may not come next;
//   - <end> may not come while one of the source's sentinels is missing;
//   - once the tokens left under the length limit are just enough for the
//     missing sentinels, only those may come.
// What stays allowed keeps the model's scores: beam search still ranks by
// the model's log-probabilities, greedy still takes the argmax.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace nmt::runtime {

class PlaceholderConstraint {
 public:
  // sentinel_ids[k - 1]: the target id of sentinel k, -1 where the
  // vocabulary lacks it. Empty: no constraint (apply does nothing).
  explicit PlaceholderConstraint(const std::vector<int64_t>& sentinel_ids);
  bool active() const { return !sentinels_.empty(); }

  // One hypothesis of the batch.
  struct Row {
    const std::vector<int64_t>* owed = nullptr;    // sentinel ids its source has (repeats included); null: leave the row alone
    const std::vector<int64_t>* tokens = nullptr;  // what it has produced so far (no <start>)
    int64_t limit = 0;                             // the most tokens it may produce
  };
  // scores: [rows.size(), V] next-token logits, row-major; forbidden entries
  // become -inf in place.
  void apply(float* scores, int64_t vocab, const std::vector<Row>& rows) const;

 private:
  std::vector<int64_t> sentinels_;  // the target ids of the sentinels the vocabulary has
  std::unordered_map<int64_t, size_t> column_;  // sentinel id -> its index in sentinels_
};

}  // namespace nmt::runtime
