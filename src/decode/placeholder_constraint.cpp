#include "decode/placeholder_constraint.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "tokenizer/special_ids.h"

namespace nmt {

PlaceholderConstraint::PlaceholderConstraint(const std::vector<int64_t>& sentinel_ids) {
  for (int64_t id : sentinel_ids)
    if (id >= 0) column_.emplace(id, sentinels_.size()), sentinels_.push_back(id);
}

void PlaceholderConstraint::apply(at::Tensor scores, const std::vector<Row>& rows) const {
  if (!active()) return;
  using torch::indexing::Slice;
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t width = static_cast<int64_t>(sentinels_.size()) + 1;  // the sentinels, then <end>
  const double kNegInf = -std::numeric_limits<double>::infinity();
  // Pass 1, on the host: what each row may not write next. Only the
  // sentinels' and <end>'s columns change, so only they are touched: an
  // additive [rows, sentinels + 1] mask of 0 and -inf.
  std::vector<double> mask(static_cast<size_t>(n * width), 0.0);
  std::vector<std::pair<int64_t, std::vector<int64_t>>> forced;  // (row, the sentinel ids it must pick from)
  bool any = false;
  std::vector<int64_t> left(sentinels_.size());
  for (int64_t r = 0; r < n; ++r) {
    const Row& row = rows[static_cast<size_t>(r)];
    if (!row.owed) continue;
    any = true;
    // left[j]: how many more times sentinel j is owed (one pass over each list).
    std::fill(left.begin(), left.end(), 0);
    for (int64_t id : *row.owed)
      if (const auto it = column_.find(id); it != column_.end()) ++left[it->second];
    for (int64_t id : *row.tokens)
      if (const auto it = column_.find(id); it != column_.end()) --left[it->second];
    int64_t missing = 0;
    std::vector<int64_t> allowed;
    for (size_t j = 0; j < sentinels_.size(); ++j) {
      if (left[j] <= 0) mask[static_cast<size_t>(r * width) + j] = kNegInf;
      else missing += left[j], allowed.push_back(sentinels_[j]);
    }
    if (missing > 0) mask[static_cast<size_t>(r * width + width - 1)] = kNegInf;
    if (missing > 0 && static_cast<int64_t>(row.tokens->size()) + missing >= row.limit)
      forced.emplace_back(r, std::move(allowed));
  }
  if (!any) return;
  // Pass 2, on the scores' device: two small gathers and a scatter.
  std::vector<int64_t> columns = sentinels_;
  columns.push_back(kEndId);
  const torch::Tensor cols = torch::tensor(columns, torch::kLong).to(scores.device());
  const torch::Tensor add =
      torch::tensor(mask, torch::kDouble).view({n, width}).to(scores.device(), scores.scalar_type());
  scores.index_put_({Slice(), cols}, scores.index({Slice(), cols}) + add);
  // Rows out of room: everything but the missing sentinels is forbidden.
  for (const auto& [r, ids] : forced) {
    const torch::Tensor keep_ids = torch::tensor(ids, torch::kLong).to(scores.device());
    torch::Tensor row = scores[r];
    const torch::Tensor kept = row.index({keep_ids}).clone();
    row.fill_(kNegInf);
    row.index_put_({keep_ids}, kept);
  }
}

}  // namespace nmt
