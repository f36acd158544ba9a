// The one placeholder recogniser. Placeholders in software messages (printf
// conversions such as %s, %'d or %1$s, and Python's %(name)s; {name} fields;
// markup tags such as <b>; character references such as &amp; or &#39;;
// --long-options): a translation that drops or changes one breaks the
// program that uses it. Masking (data/placeholder_mask.h), the placeholder
// report (eval/placeholders.h) and check-po (eval/po_check.h) all read
// them here. Plain C++17, no LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nmt::data {

// Where a placeholder is in its line (bytes).
struct PlaceholderSpan {
  size_t offset = 0, length = 0;
};

// The placeholders of a line, in order of appearance: where they are, and as text.
std::vector<PlaceholderSpan> find_placeholder_spans(const std::string& line);
std::vector<std::string> find_placeholders(const std::string& line);

// The placeholders of `source` that `translation` has fewer times than the
// source (a multiset difference, in the source's order): what a
// translation lost, which breaks the program that prints it.
std::vector<std::string> missing_placeholders(const std::string& source, const std::string& translation);

// A printf conversion that prints an argument ("%s", "%-5.2f", "%2$lu",
// "%2$.*1$s", "%<PRIuMAX>"; not "%%", glibc's "%m" nor Python's
// "%(name)s"), read as GNU gettext's C format checker reads it: which
// argument, what printf reads for it, and the int arguments its '*' width
// and precision read.
struct PrintfArgument {
  int position = 0;        // n of "%n$...", 0 when it takes the next argument in turn
  std::string conversion;  // without positions: "%2$-5lu" -> "%-5lu", "%3$.*1$s" -> "%.*s"
  // What the argument must be, in words: "int" (%d, %i), "unsigned long"
  // (%lu, %lx), "double" (%f, %g), "string", "uintmax_t"... (%<PRIuMAX>: "unsigned intmax_t").
  std::string type;
  std::vector<int> stars;  // each '*' (width, then precision): m of "*m$", 0 when in turn; each reads an int
};
// false when `p` (one of find_placeholders' results) is not such a conversion.
bool parse_printf_argument(const std::string& p, PrintfArgument* out);

// What kind of placeholder `p` is (one of find_placeholders' results):
// "printf" (%s, %1$lu, %%), "python" (%(name)s), "brace" ({0}), "markup"
// (<b>), "entity" (&amp;), "option" (--force).
const char* placeholder_kind(const std::string& p);

}  // namespace nmt::data
