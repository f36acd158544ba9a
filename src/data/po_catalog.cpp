#include "data/po_catalog.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/utf8.h"

namespace nmt::data {

bool PoEntry::has_flag(const std::string& flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

bool PoEntry::is_translated() const {
  if (is_header() || obsolete || has_flag("fuzzy") || msgstr.empty()) return false;
  return std::none_of(msgstr.begin(), msgstr.end(), [](const std::string& s) { return s.empty(); });
}

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b + 1 - a);
}

bool is_octal(char c) { return c >= '0' && c <= '7'; }

// The parser walks the file line by line; an entry is complete when the next
// one starts (a comment, msgctxt or msgid after its msgstr) or at the end.
class Parser {
 public:
  explicit Parser(std::string name) : name_(std::move(name)) {}

  PoCatalog parse(const std::string& raw) {
    const std::string_view text = utf8::strip_bom(raw);
    if (const size_t bad = utf8::first_invalid(text); bad != std::string_view::npos) {
      line_ = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(bad), '\n'));
      fail("not UTF-8 (byte " + std::to_string(bad + 1) + " of the file)");
    }
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string_view::npos) end = text.size();
      std::string line(text.substr(at, end - at));
      if (!line.empty() && line.back() == '\r') line.pop_back();
      ++line_;
      if (line.find('\0') != std::string::npos) fail("a NUL byte");
      take_line(line);
      at = end + 1;
    }
    finish_entry(/*at_end=*/true);
    check_header();
    catalog_.name = name_;
    return std::move(catalog_);
  }

 private:
  enum class Field { kNone, kContext, kId, kPlural, kStr };

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(name_ + ":" + std::to_string(line_) + ": " + what);
  }

  void take_line(std::string line) {
    bool obsolete = false;
    if (line.compare(0, 2, "#~") == 0) {
      obsolete = true;
      line = line.substr(2);
      if (!line.empty() && line[0] == '|') return;  // #~| previous msgid of an obsolete entry
    } else if (!line.empty() && line[0] == '#') {
      take_comment(line);
      return;
    }
    line = trim(line);
    if (line.empty()) {
      return;
    }
    if (line[0] == '"') {
      if (field_ == Field::kNone) fail("a string outside an entry (no keyword before it)");
      if (obsolete != entry_.obsolete) fail("an obsolete (#~) line continues a live entry, or the other way round");
      *target_ += decode_string(line);
      return;
    }
    const size_t space = line.find_first_of(" \t");
    const std::string keyword = line.substr(0, space);
    const std::string rest = space == std::string::npos ? "" : trim(line.substr(space));
    if (rest.empty() || rest[0] != '"') fail("'" + keyword + "' must be followed by a quoted string");
    take_keyword(keyword, decode_string(rest), obsolete);
  }

  void take_comment(const std::string& line) {
    // A comment after a complete entry begins the next one's prelude.
    if (field_ == Field::kStr) finish_entry(false);
    else if (field_ != Field::kNone) fail("a comment inside an entry, before its msgstr");
    if (line.compare(0, 2, "#,") == 0) {
      std::string list = line.substr(2);
      size_t at = 0;
      while (at <= list.size()) {
        size_t comma = list.find(',', at);
        if (comma == std::string::npos) comma = list.size();
        const std::string flag = trim(list.substr(at, comma - at));
        if (!flag.empty()) pending_flags_.push_back(flag);
        at = comma + 1;
      }
    }
  }

  void take_keyword(const std::string& keyword, std::string value, bool obsolete) {
    const bool starts_entry = keyword == "msgctxt" || keyword == "msgid";
    if (starts_entry && field_ == Field::kStr) finish_entry(false);
    if (field_ != Field::kNone && obsolete != entry_.obsolete)
      fail("an obsolete (#~) line inside a live entry, or the other way round");
    if (keyword == "msgctxt") {
      if (field_ != Field::kNone) fail("msgctxt must come before msgid");
      begin_entry(obsolete);
      entry_.context = std::move(value);
      target_ = &*entry_.context;
      field_ = Field::kContext;
    } else if (keyword == "msgid") {
      if (field_ == Field::kId || field_ == Field::kPlural)
        fail("msgid without a msgstr before it (the entry at line " + std::to_string(entry_.line) +
             " has none)");
      if (field_ == Field::kNone) begin_entry(obsolete);
      entry_.line = line_;
      entry_.msgid = std::move(value);
      target_ = &entry_.msgid;
      field_ = Field::kId;
    } else if (keyword == "msgid_plural") {
      if (field_ != Field::kId) fail("msgid_plural must follow a msgid");
      entry_.msgid_plural = std::move(value);
      target_ = &*entry_.msgid_plural;
      field_ = Field::kPlural;
    } else if (keyword == "msgstr") {
      if (field_ == Field::kPlural) fail("a plural entry needs msgstr[0], msgstr[1], ... not msgstr");
      if (field_ != Field::kId) fail(field_ == Field::kStr ? "a second msgstr in one entry" : "msgstr without a msgid");
      entry_.msgstr.push_back(std::move(value));
      target_ = &entry_.msgstr.back();
      field_ = Field::kStr;
    } else if (keyword.compare(0, 7, "msgstr[") == 0 && keyword.back() == ']') {
      const std::string index = keyword.substr(7, keyword.size() - 8);
      if (index.empty() || index.size() > 3 || !std::all_of(index.begin(), index.end(), ::isdigit))
        fail("'" + keyword + "': the index must be a number");
      if (!entry_.msgid_plural || (field_ != Field::kPlural && field_ != Field::kStr))
        fail("'" + keyword + "' in an entry without msgid_plural");
      if (std::stoul(index) != entry_.msgstr.size())
        fail("'" + keyword + "': expected msgstr[" + std::to_string(entry_.msgstr.size()) + "]");
      entry_.msgstr.push_back(std::move(value));
      target_ = &entry_.msgstr.back();
      field_ = Field::kStr;
    } else {
      fail("unknown keyword '" + keyword + "'");
    }
  }

  void begin_entry(bool obsolete) {
    entry_ = PoEntry{};
    entry_.line = line_;
    entry_.obsolete = obsolete;
    entry_.flags = std::move(pending_flags_);
    pending_flags_.clear();
  }

  void finish_entry(bool at_end) {
    if (field_ == Field::kNone) return;
    if (field_ != Field::kStr)
      fail(std::string(at_end ? "the file ends inside" : "a new entry begins inside") + " the entry at line " +
           std::to_string(entry_.line) + ", which has no msgstr");
    // The file is UTF-8, but \x and octal escapes can spell any byte.
    auto check_utf8 = [&](const std::string& s, const char* what) {
      if (utf8::valid(s)) return;
      line_ = entry_.line;
      fail(std::string("its escapes make the ") + what + " not UTF-8");
    };
    if (entry_.context) check_utf8(*entry_.context, "msgctxt");
    check_utf8(entry_.msgid, "msgid");
    if (entry_.msgid_plural) check_utf8(*entry_.msgid_plural, "msgid_plural");
    for (const auto& s : entry_.msgstr) check_utf8(s, "msgstr");
    if (!entry_.obsolete) {
      const auto key = std::make_pair(entry_.context.value_or(std::string(1, '\4')), entry_.msgid);
      const auto [it, fresh] = first_line_.emplace(key, entry_.line);
      if (!fresh) {
        line_ = entry_.line;
        fail("duplicate message definition (first at line " + std::to_string(it->second) + ")");
      }
    }
    catalog_.entries.push_back(std::move(entry_));
    entry_ = PoEntry{};
    field_ = Field::kNone;
    target_ = nullptr;
  }

  // `s` starts with a quote: the text up to the closing one, escapes decoded.
  std::string decode_string(const std::string& s) const {
    std::string out;
    size_t i = 1;
    for (; i < s.size() && s[i] != '"'; ++i) {
      if (s[i] != '\\') {
        out += s[i];
        continue;
      }
      if (++i >= s.size()) break;
      const char c = s[i];
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': case '"': case '\'': case '?': out += c; break;
        case 'x': {
          size_t j = i + 1;
          int value = 0;
          while (j < s.size() && j < i + 3 && std::isxdigit(static_cast<unsigned char>(s[j]))) {
            value = value * 16 + (std::isdigit(static_cast<unsigned char>(s[j])) ? s[j] - '0'
                                                                                 : (std::tolower(s[j]) - 'a' + 10));
            ++j;
          }
          if (j == i + 1) fail("'\\x' without hex digits");
          out += static_cast<char>(value);
          i = j - 1;
          break;
        }
        default:
          if (!is_octal(c)) fail(std::string("unknown escape '\\") + c + "'");
          int value = 0;
          size_t j = i;
          while (j < s.size() && j < i + 3 && is_octal(s[j])) value = value * 8 + (s[j++] - '0');
          out += static_cast<char>(value);
          i = j - 1;
      }
    }
    if (i >= s.size()) fail("a string without its closing quote");
    if (!trim(s.substr(i + 1)).empty()) fail("text after the closing quote of a string");
    return out;
  }

  // A header that names a charset must name UTF-8 (the template's
  // placeholder "CHARSET" is read as UTF-8, as msgfmt does).
  void check_header() {
    for (const PoEntry& e : catalog_.entries) {
      if (!e.is_header() || e.obsolete || e.msgstr.empty()) continue;
      const std::string& h = e.msgstr[0];
      const size_t at = h.find("charset=");
      if (at == std::string::npos) return;
      std::string charset = h.substr(at + 8, h.find_first_of("\n; ", at + 8) - (at + 8));
      std::string lower = charset;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      if (lower != "utf-8" && lower != "utf8" && lower != "charset") {
        line_ = e.line;
        fail("the header declares charset " + charset + "; convert the catalog to UTF-8 first (msgconv --to-code=UTF-8)");
      }
      return;
    }
  }

  std::string name_;
  int line_ = 0;
  PoCatalog catalog_;
  PoEntry entry_;
  Field field_ = Field::kNone;
  std::string* target_ = nullptr;
  std::vector<std::string> pending_flags_;
  std::map<std::pair<std::string, std::string>, int> first_line_;
};

}  // namespace

namespace {

// A plural expression (C syntax: ?: || && == != < > <= >= + - * / % ! and
// parentheses over n and integers) evaluated for one n; false when it is
// not one.
class PluralExpression {
 public:
  PluralExpression(const std::string& text, unsigned long n) : s_(text), n_(n) {}
  bool eval(unsigned long* out) {
    ok_ = true;
    i_ = 0;
    const unsigned long v = ternary();
    skip();
    if (!ok_ || i_ != s_.size()) return false;
    *out = v;
    return true;
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool take(const char* op) {
    skip();
    const size_t len = std::strlen(op);
    if (s_.compare(i_, len, op) != 0) return false;
    // "<" must not take the first half of "<=", nor "!" of "!=".
    if (len == 1 && i_ + 1 < s_.size() && s_[i_ + 1] == '=' && std::strchr("<>!=", op[0])) return false;
    i_ += len;
    return true;
  }
  unsigned long ternary() {
    const unsigned long c = logical_or();
    if (!take("?")) return c;
    const unsigned long a = ternary();
    if (!take(":")) ok_ = false;
    const unsigned long b = ternary();
    return c ? a : b;
  }
  unsigned long logical_or() {
    unsigned long v = logical_and();
    while (take("||")) {
      const unsigned long r = logical_and();
      v = v || r;
    }
    return v;
  }
  unsigned long logical_and() {
    unsigned long v = equality();
    while (take("&&")) {
      const unsigned long r = equality();
      v = v && r;
    }
    return v;
  }
  unsigned long equality() {
    unsigned long v = relational();
    for (;;) {
      if (take("==")) v = v == relational();
      else if (take("!=")) v = v != relational();
      else return v;
    }
  }
  unsigned long relational() {
    unsigned long v = additive();
    for (;;) {
      if (take("<=")) v = v <= additive();
      else if (take(">=")) v = v >= additive();
      else if (take("<")) v = v < additive();
      else if (take(">")) v = v > additive();
      else return v;
    }
  }
  unsigned long additive() {
    unsigned long v = multiplicative();
    for (;;) {
      if (take("+")) v += multiplicative();
      else if (take("-")) v -= multiplicative();
      else return v;
    }
  }
  unsigned long multiplicative() {
    unsigned long v = unary();
    for (;;) {
      if (take("*")) {
        v *= unary();
      } else if (take("/") || take("%")) {
        const bool div = s_[i_ - 1] == '/';
        const unsigned long r = unary();
        if (r == 0) return ok_ = false, 0;
        v = div ? v / r : v % r;
      } else {
        return v;
      }
    }
  }
  unsigned long unary() {
    if (take("!")) return !unary();
    skip();
    if (take("(")) {
      const unsigned long v = ternary();
      if (!take(")")) ok_ = false;
      return v;
    }
    if (i_ < s_.size() && s_[i_] == 'n') return ++i_, n_;
    if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      unsigned long v = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) v = v * 10 + (s_[i_++] - '0');
      return v;
    }
    ok_ = false;
    return 0;
  }

  const std::string& s_;
  unsigned long n_;
  size_t i_ = 0;
  bool ok_ = true;
};

// "name=value;" of a header field's value, or "".
std::string header_setting(const std::string& value, const std::string& name) {
  for (size_t at = value.find(name); at != std::string::npos; at = value.find(name, at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(value[at - 1])) || value[at - 1] == '_')) continue;
    size_t i = at + name.size();
    while (i < value.size() && value[i] == ' ') ++i;
    if (i >= value.size() || value[i] != '=') continue;
    const size_t end = value.find(';', i + 1);
    return value.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
  }
  return "";
}

}  // namespace

std::vector<bool> plural_forms_often(const PoCatalog& catalog) {
  for (const PoEntry& e : catalog.entries) {
    if (!e.is_header() || e.obsolete || e.msgstr.empty()) continue;
    const std::string& header = e.msgstr[0];
    const size_t at = header.find("Plural-Forms:");
    if (at == std::string::npos) return {};
    const size_t end = header.find('\n', at);
    const std::string value = header.substr(at + 13, end == std::string::npos ? std::string::npos : end - at - 13);
    const std::string nplurals = header_setting(value, "nplurals"), plural = header_setting(value, "plural");
    char* stop = nullptr;
    const unsigned long forms = std::strtoul(nplurals.c_str(), &stop, 10);
    if (nplurals.empty() || *stop != '\0' || forms == 0 || forms > 100 || plural.empty()) return {};
    std::vector<int> uses(forms, 0);
    for (unsigned long n = 0; n <= 1000; ++n) {
      unsigned long form = 0;
      if (!PluralExpression(plural, n).eval(&form)) return {};
      if (form < forms) ++uses[form];
    }
    std::vector<bool> often(forms);
    for (unsigned long f = 0; f < forms; ++f) often[f] = uses[f] >= 5;
    return often;
  }
  return {};
}

PoCatalog parse_po(const std::string& text, const std::string& name) { return Parser(name).parse(text); }

PoCatalog read_po(const std::string& path) { return parse_po(read_file(path, "catalog"), path); }

std::string po_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\v': out += "\\v"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          const char digits[] = {'\\', static_cast<char>('0' + ((c >> 6) & 7)), static_cast<char>('0' + ((c >> 3) & 7)),
                                 static_cast<char>('0' + (c & 7)), '\0'};
          out += digits;
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace nmt::data
