#include "eval/input_fit.h"

#include <fmt/format.h>

#include <algorithm>

namespace nmt::eval {

void TokenCounts::add(const std::vector<int64_t>& ids, int64_t unknown_id) {
  tokens += static_cast<int64_t>(ids.size());
  unknown += std::count(ids.begin(), ids.end(), unknown_id);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (upper + *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

std::string input_fit_problems(const TokenCounts& counts, double median_chrf, int64_t entries) {
  std::string out;
  if (counts.unknown_share() > kMaxUnknownShare)
    out = fmt::format("its vocabulary lacks {:.0f}% of the input's {} tokens (<unk>; a model that fits its input "
                      "lacks under {:.0f}%)",
                      100 * counts.unknown_share(), counts.tokens, 100 * kMaxUnknownShare);
  if (median_chrf >= 0 && median_chrf < kMinMedianChrf)
    out += fmt::format("{}the back-translations are far from their msgids (median chrF {:.1f} over {} entries, under "
                       "{:.0f})",
                       out.empty() ? "" : "; ", median_chrf, entries, kMinMedianChrf);
  return out;
}

}  // namespace nmt::eval
