// How long a translation may grow: decoding stops at <end>, decode.max_len,
// or decode.max_len_factor × the source's pieces + kLengthSlack. A factor
// that suits one pair of tokenizers cuts another's translations short: with
// word-sized source pieces and letter-sized target pieces a sentence of 2
// source pieces needs 17 target pieces ("they have one dog"), and a factor
// of 3 stops it at 11 ("they have one"). So unless the user sets it, the
// factor comes from the training corpus itself: its target/source length
// ratio, counted when the corpus is prepared (data/prepare.h) and saved with
// every checkpoint (TrainingState::target_source_ratio). The ratio counted
// is the one the limit needs: for a pair of s source and t target pieces,
// (t + 1 - kLengthSlack) / s, the factor with which the limit holds its
// target and <end> (the slack already covers short pairs). A translation that
// stops at the limit without ending is counted and reported wherever
// translations are made (translate, evaluate, validation, the service's
// /metrics), so a limit that is still too tight is seen, not guessed at.
// Plain C++17, no LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/decode_options.h"

namespace nmt {

// The share of training pairs whose target/source ratio the recorded ratio
// covers: a few pairs of odd lengths (a one-piece source with a long
// target) must not set the limit for everything.
constexpr double kLengthRatioQuantile = 0.999;
// The factor derived from the recorded ratio: the ratio times this margin
// (a translation may run longer than its reference), and at least
// kMinDerivedFactor. On the shipped corpora: data/toy 4.0 -> 6 (a factor
// of 3 left 150 of its 26,000 training targets no room), data/real 2.17
// -> 3.26.
constexpr double kLengthRatioMargin = 1.5;
constexpr double kMinDerivedFactor = 2.0;
// The factor of checkpoints that record no ratio: the default before the
// ratio was recorded.
constexpr double kLegacyLengthFactor = 3.0;

// Counts pairs by their target/source length ratio as the limit needs it,
// (t + 1 - kLengthSlack) / s and at least 0, in steps of 1/100 rounded up,
// for its quantiles. Pairs of one corpus may be added from several counters
// (merge).
class LengthRatioCounter {
 public:
  // Both lengths at least 1 (pairs with an empty side are never kept).
  void add(int64_t src_tokens, int64_t tgt_tokens);
  void merge(const LengthRatioCounter& other);
  uint64_t pairs() const { return pairs_; }
  // The smallest ratio r (a multiple of 1/100) such that at least a share q
  // of the pairs have a ratio <= r; NaN with no pairs.
  double quantile(double q) const;

 private:
  static constexpr int kStepsPerUnit = 100;
  static constexpr int64_t kMaxSteps = 1000 * kStepsPerUnit;  // ratios above 1000 count as 1000
  std::vector<uint64_t> counts_;  // counts_[k]: pairs with ceil(ratio * 100) == k
  uint64_t pairs_ = 0;
};

// The factor decoding uses, and where it came from in words (for the log).
struct LengthFactor {
  double factor = kLegacyLengthFactor;
  std::string origin;
};
// configured: decode.max_len_factor (or --max-len-factor) when set, which
// wins (configured_by names it in the origin); unset (auto):
// kLengthRatioMargin × corpus_ratio, at least kMinDerivedFactor.
// corpus_ratio NaN (a checkpoint saved before the ratio was recorded):
// kLegacyLengthFactor, and the origin says so.
LengthFactor resolve_length_factor(const std::optional<double>& configured, double corpus_ratio,
                                   const std::string& configured_by = "decode.max_len_factor");

// The limit in words: "8.5 × source pieces + 5 (from ...), at most 80
// target pieces" (the origin only when with_origin).
std::string describe_length_limit(const DecodeOptions& options, int64_t max_positions, bool with_origin = true);

// One log line for the translations that stopped at the limit without
// ending: "2 of 50 translations stopped at the length limit (...) before
// ending, maybe cut short: line 3, line 9 (raise --max-len-factor or
// --max-len)", at most 10 lines named; `first_line` numbers them (1 for a
// file). "0 of 50 ..." when none did.
std::string describe_length_limited(const std::vector<size_t>& limited, size_t translations,
                                    const DecodeOptions& options, int64_t max_positions, int64_t first_line = 1);

}  // namespace nmt
