// The one UTF-8 decoder: strict (no overlong forms, no surrogates, nothing
// above U+10FFFF, no truncated sequences). Plain C++17.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nmt::utf8 {

// Length (1..4) of the well-formed sequence at s[i], its code point in *cp;
// 0 when the bytes there are not well-formed UTF-8.
int next(std::string_view s, size_t i, char32_t* cp);

// Offset of the first byte that is not well-formed UTF-8, or npos.
size_t first_invalid(std::string_view s);
inline bool valid(std::string_view s) { return first_invalid(s) == std::string_view::npos; }

// Code points in s, which must be well-formed (first_invalid: npos).
size_t length(std::string_view s);

// s without a leading byte order mark (EF BB BF).
std::string_view strip_bom(std::string_view s);

}  // namespace nmt::utf8
