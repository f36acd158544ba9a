#include "data/placeholders.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

namespace nmt::data {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_ident(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }

// A printf directive as GNU gettext's C format checker reads one (and
// glibc's printf): %[n$][flags][width][.precision][size]conversion, where
// width and precision may be '*' or '*m$' (an int argument of their own),
// and size+conversion may be an ISO C99 <inttypes.h> macro such as
// <PRIuMAX> or <PRId64>, as gettext writes them in catalogs. Also "%%",
// and Python's "%(name)s".
struct Directive {
  size_t length = 0;         // 0: not a directive
  bool percent = false;      // "%%"
  bool named = false;        // Python's %(name)s
  int position = 0;          // n of "%n$", 0: the next argument in turn
  std::vector<int> stars;    // '*' width, then '*' precision: m of "*m$", 0 in turn
  std::string size;          // hh h l ll L q j z Z t, or the macro's (8 16 32 64 LEAST8 .. FAST64 MAX PTR)
  bool macro = false;        // size and conversion from an <inttypes.h> macro
  char conversion = 0;
  size_t position_end = 0;   // where "n$" ends (1 when there is none)
};

// Digits at s[j..]: their value (capped) and where they end.
size_t digits_at(const std::string& s, size_t j, int* value) {
  long v = 0;
  while (j < s.size() && is_digit(s[j])) v = std::min(100000L, v * 10 + (s[j++] - '0'));
  if (value) *value = static_cast<int>(v);
  return j;
}

// '*' or '*m$' at s[j]: appends to d.stars, returns where it ends (j: none; npos: malformed).
size_t star_at(const std::string& s, size_t j, Directive& d) {
  if (j >= s.size() || s[j] != '*') return j;
  int m = 0;
  const size_t k = digits_at(s, j + 1, &m);
  if (k > j + 1) {
    if (k >= s.size() || s[k] != '$' || m == 0) return std::string::npos;
    d.stars.push_back(m);
    return k + 1;
  }
  d.stars.push_back(0);
  return j + 1;
}

// "<PRIu64>", "<PRIdMAX>", ... at s[j]: its conversion letter and size; where it ends (j: none).
size_t macro_at(const std::string& s, size_t j, Directive& d) {
  if (s.compare(j, 4, "<PRI") != 0 || j + 5 >= s.size() || !std::strchr("diouxX", s[j + 4]) || s[j + 4] == '\0')
    return j;
  const size_t end = s.find('>', j + 5);
  if (end == std::string::npos) return j;
  const std::string size = s.substr(j + 5, end - j - 5);
  static const char* const kSizes[] = {"8",       "16",      "32",      "64",     "LEAST8", "LEAST16", "LEAST32",
                                       "LEAST64", "FAST8",   "FAST16",  "FAST32", "FAST64", "MAX",     "PTR"};
  if (std::none_of(std::begin(kSizes), std::end(kSizes), [&](const char* k) { return size == k; })) return j;
  d.conversion = s[j + 4];
  d.size = size;
  d.macro = true;
  return end + 1;
}

Directive parse_directive(const std::string& s, size_t i) {
  Directive d;
  size_t j = i + 1;
  if (j < s.size() && s[j] == '%') {
    d.percent = true;
    d.length = 2;
    return d;
  }
  int n = 0;
  size_t k = digits_at(s, j, &n);
  if (k > j && k < s.size() && s[k] == '$') {  // positional: %1$s
    if (n == 0) return {};
    d.position = n;
    j = k + 1;
  }
  d.position_end = j - i;
  if (j < s.size() && s[j] == '(') {  // Python's %(name)s
    k = j + 1;
    while (k < s.size() && is_ident(s[k])) ++k;
    if (k == j + 1 || k >= s.size() || s[k] != ')') return {};
    j = k + 1;
    d.named = true;
  }
  // Flags (glibc's I for locale digits too), without the space flag: in
  // prose "50 % ok" is a percent sign.
  while (j < s.size() && s[j] != '\0' && std::strchr("-+#0'I", s[j])) ++j;
  if ((j = star_at(s, j, d)) == std::string::npos) return {};
  j = digits_at(s, j, nullptr);
  if (j < s.size() && s[j] == '.') {
    if ((j = star_at(s, j + 1, d)) == std::string::npos) return {};
    j = digits_at(s, j, nullptr);
  }
  if (const size_t m = macro_at(s, j, d); m != j) {
    d.length = m - i;
    return d.named ? Directive{} : d;
  }
  for (const char* len : {"hh", "ll", "h", "l", "L", "q", "j", "z", "Z", "t"}) {
    if (s.compare(j, std::strlen(len), len) == 0) {
      d.size = len;
      j += std::strlen(len);
      break;
    }
  }
  if (j >= s.size() || s[j] == '\0') return {};
  const char c = s[j];
  const bool ok = std::strchr("diouxXeEfFgGaAcspnCS", c) || (c == 'm' && !d.named && d.size.empty()) ||
                  (d.named && c == 'r');
  if (!ok) return {};
  d.conversion = c;
  d.length = j + 1 - i;
  return d;
}

size_t printf_length(const std::string& s, size_t i) { return parse_directive(s, i).length; }

// What printf reads for a directive's value, in words, as gettext tells
// argument types apart: "%d" and "%i" read an int, "%u" and "%x" an
// unsigned int, "%e", "%f", "%g" a double; the size counts ("%ld" is a long).
std::string argument_type(const Directive& d) {
  const char c = d.conversion;
  const auto integer_size = [&]() -> std::string {
    if (d.macro) {
      if (d.size == "MAX") return "intmax_t";
      if (d.size == "PTR") return "intptr_t";
      if (d.size.compare(0, 5, "LEAST") == 0) return "int_least" + d.size.substr(5) + "_t";
      if (d.size.compare(0, 4, "FAST") == 0) return "int_fast" + d.size.substr(4) + "_t";
      return "int" + d.size + "_t";
    }
    if (d.size == "hh") return "char";
    if (d.size == "h") return "short";
    if (d.size == "l") return "long";
    if (d.size == "ll" || d.size == "q" || d.size == "L") return "long long";
    if (d.size == "j") return "intmax_t";
    if (d.size == "z" || d.size == "Z") return "size_t";
    if (d.size == "t") return "ptrdiff_t";
    return "int";
  };
  if (std::strchr("di", c)) return integer_size();
  if (std::strchr("ouxX", c)) return "unsigned " + integer_size();
  if (std::strchr("eEfFgGaA", c)) return d.size == "L" ? "long double" : "double";
  if (c == 'c') return d.size == "l" ? "wint_t" : "int (a character)";
  if (c == 'C') return "wint_t";
  if (c == 's') return d.size == "l" ? "wide string" : "string";
  if (c == 'S') return "wide string";
  if (c == 'p') return "pointer";
  if (c == 'n') return "pointer to " + integer_size();
  return std::string(1, c);
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

// A Python brace field: {0}, {name}, with .attr or [key] parts, a
// !conversion and a :format_spec. Not a shell's ${NAME}, nor an upper-case
// word in braces ({INTEGER}, {FILE}): usage text names a value so, and
// translators translate it.
size_t brace_length(const std::string& s, size_t i) {
  if (i > 0 && s[i - 1] == '$') return 0;
  size_t j = i + 1;
  bool upper = false, lower = false;
  while (j < s.size() && (is_ident(s[j]) || s[j] == '.' || s[j] == '[' || s[j] == ']')) {
    upper = upper || (s[j] >= 'A' && s[j] <= 'Z');
    lower = lower || (s[j] >= 'a' && s[j] <= 'z');
    ++j;
  }
  if (upper && !lower && j - i > 2) return 0;  // {INTEGER}; {X} stays a field
  if (j < s.size() && s[j] == '!') {
    if (j + 1 >= s.size() || !std::strchr("rsa", s[j + 1]) || s[j + 1] == '\0') return 0;
    j += 2;
  }
  if (j < s.size() && s[j] == ':') {
    ++j;
    while (j < s.size() && s[j] != '}' && s[j] != '{' && s[j] != '\n' && j - i < 40) ++j;
  }
  // "{}" is left alone: in C catalogs it is find's "-exec ... {}" far more
  // often than an automatic field.
  if (j >= s.size() || s[j] != '}' || j == i + 1) return 0;
  return j + 1 - i;
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
  // The name ends the tag or is followed by attributes: "<i18n-zh@...>" is
  // an e-mail address, not <i>.
  if (j < s.size() && !(s[j] == '>' || s[j] == '/' || s[j] == ' ' || s[j] == '\t' || s[j] == '\n')) return 0;
  while (j < s.size() && s[j] != '>' && s[j] != '<') ++j;
  return j < s.size() && s[j] == '>' ? j + 1 - i : 0;
}

// --option-name (after a space, quote or the line start); long options
// start in lower case or a digit ("--Long Link--" is tar's text).
size_t option_length(const std::string& s, size_t i) {
  if (i > 0 && (is_ident(s[i - 1]) || s[i - 1] == '-')) return 0;
  size_t j = i + 2;
  if (j >= s.size() || !((s[j] >= 'a' && s[j] <= 'z') || is_digit(s[j]))) return 0;
  while (j < s.size() && (is_ident(s[j]) || s[j] == '-')) ++j;
  return j - i;
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
  if (p.size() < 2 || p[0] != '%') return false;
  const Directive d = parse_directive(p, 0);
  if (d.length != p.size() || d.percent || d.named || d.conversion == 'm') return false;
  PrintfArgument a;
  a.position = d.position;
  // Without its position, and its stars' positions: "%3$.*1$s" -> "%.*s".
  for (size_t i = d.position_end; i < p.size(); ++i) {
    a.conversion += p[i];
    if (p[i] == '*') {
      size_t k = i + 1;
      while (k < p.size() && is_digit(p[k])) ++k;
      if (k > i + 1 && k < p.size() && p[k] == '$') i = k;
    }
  }
  a.conversion.insert(0, "%");
  a.type = argument_type(d);
  a.stars = d.stars;
  *out = std::move(a);
  return true;
}

std::vector<std::string> missing_placeholders(const std::string& source, const std::string& translation) {
  std::map<std::string, int> have;
  for (const std::string& p : find_placeholders(translation)) ++have[p];
  std::vector<std::string> lost;
  for (const std::string& p : find_placeholders(source))
    if (have[p]-- <= 0) lost.push_back(p);
  return lost;
}

const char* placeholder_kind(const std::string& p) {
  if (p.size() >= 2 && p[0] == '%') return p[1] == '(' ? "python" : "printf";
  if (!p.empty() && p[0] == '{') return "brace";
  if (!p.empty() && p[0] == '<') return "markup";
  if (!p.empty() && p[0] == '&') return "entity";
  return "option";
}

}  // namespace nmt::data
