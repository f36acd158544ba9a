#include "eval/placeholders.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

namespace nmt::eval {

using data::find_placeholders;
using data::placeholder_kind;

namespace {

int64_t multiset_overlap(std::vector<std::string> a, std::vector<std::string> b) {
  std::map<std::string, int64_t> count;
  for (auto& x : b) ++count[x];
  int64_t hits = 0;
  for (auto& x : a)
    if (count[x]-- > 0) ++hits;
  return hits;
}

}  // namespace

PlaceholderReport placeholder_report(const std::vector<std::string>& sources,
                                     const std::vector<std::string>& hyps,
                                     const std::vector<std::string>& refs) {
  if (sources.size() != hyps.size() || hyps.size() != refs.size())
    throw std::invalid_argument("placeholder_report: " + std::to_string(sources.size()) + " sources, " +
                                std::to_string(hyps.size()) + " hypotheses, " +
                                std::to_string(refs.size()) + " references");
  PlaceholderReport r;
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto src = find_placeholders(sources[i]);
    const auto hyp = find_placeholders(hyps[i]);
    const auto ref = find_placeholders(refs[i]);
    if (!src.empty()) {
      ++r.lines;
      r.source_total += static_cast<int64_t>(src.size());
      r.source_kept += multiset_overlap(src, hyp);
    }
    if (!ref.empty()) {
      ++r.lines_with_reference;
      r.reference_total += static_cast<int64_t>(ref.size());
      // The multiset overlap, counted under each reference placeholder's kind.
      std::map<std::string, int64_t> available;
      for (const auto& x : hyp) ++available[x];
      for (const auto& x : ref) {
        PlaceholderReport::Kind& k = r.by_kind[placeholder_kind(x)];
        ++k.total;
        if (available[x]-- > 0) {
          ++k.matched;
          ++r.reference_matched;
        }
      }
      auto a = hyp, b = ref;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      r.lines_exact += a == b;
    }
  }
  return r;
}

std::string format_placeholders(const PlaceholderReport& r) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "placeholders: %lld source lines carry %lld; hypotheses keep %.1f%% of the "
                "source's verbatim and %.1f%% of the reference's; %.1f%% of %lld lines match the "
                "reference's exactly",
                static_cast<long long>(r.lines), static_cast<long long>(r.source_total),
                r.source_kept_pct(), r.reference_matched_pct(), r.lines_exact_pct(),
                static_cast<long long>(r.lines_with_reference));
  std::string out = buf;
  std::string kinds;
  for (const auto& [kind, k] : r.by_kind) {
    std::snprintf(buf, sizeof buf, "%s%s %.1f%% of %lld", kinds.empty() ? "" : ", ", kind.c_str(),
                  k.total ? 100.0 * static_cast<double>(k.matched) / static_cast<double>(k.total) : 100.0,
                  static_cast<long long>(k.total));
    kinds += buf;
  }
  if (!kinds.empty()) out += "; by kind (kept of the reference's): " + kinds;
  return out;
}

}  // namespace nmt::eval
