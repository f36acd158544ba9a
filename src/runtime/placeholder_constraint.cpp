#include "runtime/placeholder_constraint.h"

#include <algorithm>
#include <limits>

#include "tokenizer/special_ids.h"

namespace nmt::runtime {

PlaceholderConstraint::PlaceholderConstraint(const std::vector<int64_t>& sentinel_ids) {
  for (int64_t id : sentinel_ids)
    if (id >= 0) column_.emplace(id, sentinels_.size()), sentinels_.push_back(id);
}

void PlaceholderConstraint::apply(float* scores, int64_t vocab, const std::vector<Row>& rows) const {
  if (!active()) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::vector<int64_t> left(sentinels_.size());
  std::vector<int64_t> allowed;
  std::vector<float> kept;
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    if (!row.owed) continue;
    float* s = scores + static_cast<int64_t>(r) * vocab;
    // left[j]: how many more times sentinel j is owed (one pass over each list).
    std::fill(left.begin(), left.end(), 0);
    for (int64_t id : *row.owed)
      if (const auto it = column_.find(id); it != column_.end()) ++left[it->second];
    for (int64_t id : *row.tokens)
      if (const auto it = column_.find(id); it != column_.end()) --left[it->second];
    // A sentinel the source lacks, or has had enough of, may not come next;
    // <end> may not while one is missing.
    int64_t missing = 0;
    allowed.clear();
    for (size_t j = 0; j < sentinels_.size(); ++j) {
      if (left[j] <= 0) s[sentinels_[j]] += kNegInf;
      else missing += left[j], allowed.push_back(sentinels_[j]);
    }
    if (missing == 0) continue;
    s[kEndId] += kNegInf;
    // Out of room: everything but the missing sentinels is forbidden.
    if (static_cast<int64_t>(row.tokens->size()) + missing >= row.limit) {
      kept.clear();
      for (int64_t id : allowed) kept.push_back(s[id]);
      std::fill(s, s + vocab, kNegInf);
      for (size_t k = 0; k < allowed.size(); ++k) s[allowed[k]] = kept[k];
    }
  }
}

}  // namespace nmt::runtime
