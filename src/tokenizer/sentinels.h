// The sentinel symbols of placeholder protection (data/placeholder_mask.h):
// private-use characters U+E001 .. U+E000+kMaxSentinels that no text of
// either language has and no normalization changes. The tokenizers are
// trained with each as one piece; decoding constrains them by their ids.
// Plain C++17.
#pragma once

#include <string>
#include <vector>

namespace nmt {

constexpr int kMaxSentinels = 24;

// Sentinel k (1 <= k <= kMaxSentinels), as UTF-8 (3 bytes: EE 80..BF 80..BF).
inline std::string sentinel(int k) {
  const char32_t cp = 0xE000 + static_cast<char32_t>(k);
  return {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
          static_cast<char>(0x80 | (cp & 0x3F))};
}

// All of them, in order: what the tokenizers are trained with.
inline const std::vector<std::string>& sentinel_symbols() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v;
    for (int k = 1; k <= kMaxSentinels; ++k) v.push_back(sentinel(k));
    return v;
  }();
  return all;
}

}  // namespace nmt
