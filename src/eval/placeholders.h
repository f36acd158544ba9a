// How well translations keep placeholders (data/placeholders.h): counted
// against their sources and references, by kind. Plain C++17, no LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/placeholders.h"

namespace nmt::eval {

struct PlaceholderReport {
  int64_t lines = 0;                // source lines with at least one placeholder
  int64_t source_total = 0;         // placeholders in those source lines
  int64_t source_kept = 0;          // ... found verbatim in the hypothesis (multiset)
  int64_t reference_total = 0;      // placeholders in the references of all lines
  int64_t reference_matched = 0;    // ... found in the hypothesis (multiset)
  int64_t lines_with_reference = 0; // lines whose reference has placeholders
  int64_t lines_exact = 0;          // ... whose hypothesis has exactly the reference's multiset
  struct Kind {
    int64_t total = 0, matched = 0;  // the references' placeholders of a kind, and those in the hypothesis
  };
  std::map<std::string, Kind> by_kind;  // placeholder_kind -> counts

  double source_kept_pct() const { return source_total ? 100.0 * source_kept / source_total : 100.0; }
  double reference_matched_pct() const {
    return reference_total ? 100.0 * reference_matched / reference_total : 100.0;
  }
  double lines_exact_pct() const {
    return lines_with_reference ? 100.0 * lines_exact / lines_with_reference : 100.0;
  }
};

// std::invalid_argument when the three lists differ in length.
PlaceholderReport placeholder_report(const std::vector<std::string>& sources,
                                     const std::vector<std::string>& hyps,
                                     const std::vector<std::string>& refs);

// "placeholders: 718 source lines carry 1034; hypotheses keep 91.2% of the
// source's verbatim and 93.5% of the reference's; 88.0% of lines match the
// reference's exactly; by kind (kept of the reference's): printf 95.1% of
// 820, markup 90.0% of 40, ..."
std::string format_placeholders(const PlaceholderReport& r);

}  // namespace nmt::eval
