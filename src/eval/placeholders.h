// Placeholders in software messages (printf conversions such as %s, %'d or
// %1$s, and Python's %(name)s; {name} fields; markup tags such as <b>;
// character references such as &amp; or &#39;; --long-options): a
// translation that drops or changes one breaks the program that uses it.
// Plain C++17, no LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nmt::eval {

// Where a placeholder is in its line (bytes).
struct PlaceholderSpan {
  size_t offset = 0, length = 0;
};

// The placeholders of a line, in order of appearance: where they are, and as text.
std::vector<PlaceholderSpan> find_placeholder_spans(const std::string& line);
std::vector<std::string> find_placeholders(const std::string& line);

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
