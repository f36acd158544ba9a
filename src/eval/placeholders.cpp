#include "eval/placeholders.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

namespace nmt::eval {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_ident(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }

// %[n$][flags][width][.precision][length]conversion, or %%; returns its length (0: none).
size_t printf_length(const std::string& s, size_t i) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '%') return 2;
  size_t k = j;
  while (k < s.size() && is_digit(s[k])) ++k;
  if (k > j && k < s.size() && s[k] == '$') j = k + 1;  // positional: %1$s
  bool named = false;
  if (j < s.size() && s[j] == '(') {  // Python's %(name)s
    k = j + 1;
    while (k < s.size() && is_ident(s[k])) ++k;
    if (k == j + 1 || k >= s.size() || s[k] != ')') return 0;
    j = k + 1;
    named = true;
  }
  // Flags, without the space flag: in prose "50 % ok" is a percent sign.
  while (j < s.size() && s[j] != '\0' && std::strchr("-+#0'", s[j])) ++j;
  while (j < s.size() && (is_digit(s[j]) || s[j] == '*')) ++j;
  if (j < s.size() && s[j] == '.') {
    ++j;
    while (j < s.size() && (is_digit(s[j]) || s[j] == '*')) ++j;
  }
  for (const char* len : {"hh", "ll", "h", "l", "L", "q", "j", "z", "t"}) {
    if (s.compare(j, std::strlen(len), len) == 0) {
      j += std::strlen(len);
      break;
    }
  }
  if (j < s.size() && s[j] != '\0' && std::strchr("diouxXeEfFgGaAcspn", s[j])) return j + 1 - i;
  if (named && j < s.size() && s[j] == 'r') return j + 1 - i;  // %(name)r
  return 0;
}

// A character reference of markup: &amp; &lt; &#39; &#x27;
size_t entity_length(const std::string& s, size_t i) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '#') {
    ++j;
    const bool hex = j < s.size() && (s[j] == 'x' || s[j] == 'X');
    if (hex) ++j;
    const size_t digits = j;
    while (j < s.size() && (is_digit(s[j]) || (hex && s[j] != '\0' && std::strchr("abcdefABCDEF", s[j])))) ++j;
    if (j == digits) return 0;
  } else {
    const size_t name = j;
    while (j < s.size() && is_alpha(s[j])) ++j;
    if (j == name || j - name > 8) return 0;
  }
  return j < s.size() && s[j] == ';' ? j + 1 - i : 0;
}

// {name} or {0}
size_t brace_length(const std::string& s, size_t i) {
  size_t j = i + 1;
  while (j < s.size() && is_ident(s[j])) ++j;
  return j > i + 1 && j < s.size() && s[j] == '}' ? j + 1 - i : 0;
}

// Formatting markup (<b>, </i>, <span foreground="red">, <br/>); usage
// placeholders such as <file> are words translators translate, not markup.
size_t tag_length(const std::string& s, size_t i) {
  static const char* const kTags[] = {"b", "i", "u", "s", "tt", "big", "small", "span", "a", "br",
                                      "sub", "sup", "em", "strong", "p", "markup"};
  size_t j = i + 1;
  if (j < s.size() && s[j] == '/') ++j;
  const size_t name_start = j;
  while (j < s.size() && is_alpha(s[j])) ++j;
  const std::string name = s.substr(name_start, j - name_start);
  if (std::none_of(std::begin(kTags), std::end(kTags), [&](const char* t) { return name == t; }))
    return 0;
  while (j < s.size() && s[j] != '>' && s[j] != '<') ++j;
  return j < s.size() && s[j] == '>' ? j + 1 - i : 0;
}

// --option-name (after a space, quote or the line start)
size_t option_length(const std::string& s, size_t i) {
  if (i > 0 && (is_ident(s[i - 1]) || s[i - 1] == '-')) return 0;
  size_t j = i + 2;
  if (j >= s.size() || !(is_alpha(s[j]) || is_digit(s[j]))) return 0;
  while (j < s.size() && (is_ident(s[j]) || s[j] == '-')) ++j;
  return j - i;
}

int64_t multiset_overlap(std::vector<std::string> a, std::vector<std::string> b) {
  std::map<std::string, int64_t> count;
  for (auto& x : b) ++count[x];
  int64_t hits = 0;
  for (auto& x : a)
    if (count[x]-- > 0) ++hits;
  return hits;
}

}  // namespace

std::vector<PlaceholderSpan> find_placeholder_spans(const std::string& line) {
  std::vector<PlaceholderSpan> out;
  for (size_t i = 0; i < line.size();) {
    size_t n = 0;
    if (line[i] == '%') n = printf_length(line, i);
    else if (line[i] == '{') n = brace_length(line, i);
    else if (line[i] == '<') n = tag_length(line, i);
    else if (line[i] == '&') n = entity_length(line, i);
    else if (line[i] == '-' && line.compare(i, 2, "--") == 0) n = option_length(line, i);
    if (n > 0) {
      out.push_back({i, n});
      i += n;
    } else {
      ++i;
    }
  }
  return out;
}

std::vector<std::string> find_placeholders(const std::string& line) {
  std::vector<std::string> out;
  for (const PlaceholderSpan& s : find_placeholder_spans(line)) out.push_back(line.substr(s.offset, s.length));
  return out;
}

bool parse_printf_argument(const std::string& p, PrintfArgument* out) {
  if (p.size() < 2 || p[0] != '%' || p == "%%" || p[1] == '(') return false;
  size_t i = 1;
  int n = 0;
  while (i < p.size() && is_digit(p[i]) && n < 1000) n = n * 10 + (p[i++] - '0');
  PrintfArgument a;
  if (i > 1 && i < p.size() && p[i] == '$') {
    a.position = n;
    a.conversion = "%" + p.substr(i + 1);
  } else {
    a.conversion = p;
  }
  // The type: the length modifier and conversion at the end, without flags, width or precision.
  size_t t = a.conversion.size() - 1;
  while (t > 1 && std::strchr("hlLqjzt", a.conversion[t - 1]) && a.conversion[t - 1] != '\0') --t;
  a.type = a.conversion.substr(t);
  *out = std::move(a);
  return true;
}

const char* placeholder_kind(const std::string& p) {
  if (p.size() >= 2 && p[0] == '%') return p[1] == '(' ? "python" : "printf";
  if (!p.empty() && p[0] == '{') return "brace";
  if (!p.empty() && p[0] == '<') return "markup";
  if (!p.empty() && p[0] == '&') return "entity";
  return "option";
}

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
