// Whether a model fits the text it is given, judged on that text itself: a
// model can fit its own validation data (the toy model's BLEU 99.8) and
// still know nothing of a catalog's messages. Two signs, both cheap:
// - unknown source tokens: the share of the input's tokens that the model's
//   source vocabulary lacks (<unk>). Software catalogs read by the toy
//   model: 41-43% of their tokens (apt, pg_dump); by a model trained on
//   data/real: 0.0-0.2% (apt, bash, coreutils, pg_dump, tar);
// - check-po: how far the back-translations are from their msgids (median
//   chrF), which needs a reference and so only check-po has.
// Figures: docs/check_po.md. Plain C++17, no LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt::eval {

// Above this share of unknown source tokens, the input is unlike what the
// model was trained on.
constexpr double kMaxUnknownShare = 0.05;
// Below this median chrF of back-translations against their msgids, a
// ranking by them says little.
constexpr double kMinMedianChrf = 20.0;

// Tokens read and how many of them the vocabulary lacks.
struct TokenCounts {
  int64_t tokens = 0, unknown = 0;
  double unknown_share() const { return tokens > 0 ? static_cast<double>(unknown) / static_cast<double>(tokens) : 0; }
  void add(const std::vector<int64_t>& ids, int64_t unknown_id);
};

// The median of `values` (0 for none).
double median(std::vector<double> values);

// "" when the input fits; else what does not, in words, for a warning:
// "its vocabulary lacks 43% of the input's tokens (<unk>)" and/or "the
// back-translations are far from their msgids (median chrF 6.3 over 511
// entries)". median_chrf < 0: not measured (no references).
std::string input_fit_problems(const TokenCounts& counts, double median_chrf = -1, int64_t entries = 0);

}  // namespace nmt::eval
