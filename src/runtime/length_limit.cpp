#include "runtime/length_limit.h"

#include <algorithm>
#include <cmath>

#include "util/number_text.h"

namespace nmt {

void LengthRatioCounter::add(int64_t src_tokens, int64_t tgt_tokens) {
  if (src_tokens <= 0 || tgt_tokens <= 0) return;
  // ceil(needed / src * 100) in integers: no pair is counted below its ratio.
  const int64_t needed = std::max<int64_t>(0, tgt_tokens + 1 - kLengthSlack);
  const int64_t steps = std::min(kMaxSteps, (needed * kStepsPerUnit + src_tokens - 1) / src_tokens);
  if (static_cast<size_t>(steps) >= counts_.size()) counts_.resize(static_cast<size_t>(steps) + 1, 0);
  ++counts_[static_cast<size_t>(steps)];
  ++pairs_;
}

void LengthRatioCounter::merge(const LengthRatioCounter& other) {
  if (other.counts_.size() > counts_.size()) counts_.resize(other.counts_.size(), 0);
  for (size_t s = 0; s < other.counts_.size(); ++s) counts_[s] += other.counts_[s];
  pairs_ += other.pairs_;
}

double LengthRatioCounter::quantile(double q) const {
  if (pairs_ == 0) return std::nan("");
  // The pairs that may lie above: floor((1 - q) * pairs).
  const auto above = static_cast<uint64_t>(std::floor((1.0 - q) * static_cast<double>(pairs_)));
  const uint64_t needed = pairs_ - above;
  uint64_t seen = 0;
  for (size_t s = 0; s < counts_.size(); ++s) {
    seen += counts_[s];
    if (seen >= needed) return static_cast<double>(s) / kStepsPerUnit;
  }
  return static_cast<double>(counts_.size() - 1) / kStepsPerUnit;
}

LengthFactor resolve_length_factor(const std::optional<double>& configured, double corpus_ratio,
                                   const std::string& configured_by) {
  const bool known = std::isfinite(corpus_ratio) && corpus_ratio > 0;
  const std::string no_ratio =
      "the checkpoint records no target/source length ratio of its training corpus (saved by an earlier nmt)";
  // Two decimals are plenty, and read better in the log.
  const double derived =
      known ? std::max(kMinDerivedFactor, std::ceil(kLengthRatioMargin * corpus_ratio * 100) / 100) : 0;
  const std::string ratio_text = known ? "the training corpus's target/source length ratio " +
                                             shortest_number(corpus_ratio) + " (" +
                                             shortest_number(kLengthRatioQuantile * 100) + "% of its pairs)"
                                       : "";
  if (configured)
    return {*configured, configured_by + (known ? "; auto would be " + shortest_number(derived) + ", from " + ratio_text
                                                : "; " + no_ratio)};
  if (!known)
    return {kLegacyLengthFactor, no_ratio + ", so the earlier default " + shortest_number(kLegacyLengthFactor) +
                                     "; set --max-len-factor if translations stop at it"};
  return {derived, "from " + ratio_text + " × " + shortest_number(kLengthRatioMargin)};
}

std::string describe_length_limit(const DecodeOptions& options, int64_t max_positions, bool with_origin) {
  const int64_t most = std::min(options.max_len, max_positions - 1);
  if (options.max_len_factor <= 0) return "at most " + std::to_string(most) + " target pieces (max_len_factor 0: off)";
  std::string out = shortest_number(options.max_len_factor) + " × source pieces + " + std::to_string(kLengthSlack);
  if (with_origin && !options.max_len_origin.empty()) out += " (" + options.max_len_origin + ")";
  return out + ", at most " + std::to_string(most) + " target pieces";
}

std::string describe_length_limited(const std::vector<size_t>& limited, size_t translations,
                                    const DecodeOptions& options, int64_t max_positions, int64_t first_line) {
  constexpr size_t kNamed = 10;
  std::string out = std::to_string(limited.size()) + " of " + std::to_string(translations) +
                    (translations == 1 ? " translation" : " translations") + " stopped at the length limit (" +
                    describe_length_limit(options, max_positions, false) + ") before ending";
  if (limited.empty()) return out;
  out += ", maybe cut short:";
  for (size_t i = 0; i < limited.size() && i < kNamed; ++i)
    out += std::string(i ? "," : "") + " line " + std::to_string(first_line + static_cast<int64_t>(limited[i]));
  if (limited.size() > kNamed) out += ", and " + std::to_string(limited.size() - kNamed) + " more";
  return out + " (raise --max-len-factor or --max-len)";
}

}  // namespace nmt
