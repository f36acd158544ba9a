#include "eval/po_check.h"

#include <algorithm>
#include <map>

#include "eval/placeholders.h"

namespace nmt::eval {

const char* fault_name(PlaceholderFault fault) {
  switch (fault) {
    case PlaceholderFault::kMissing: return "missing";
    case PlaceholderFault::kExtra: return "extra";
    case PlaceholderFault::kReordered: return "reordered";
  }
  return "?";
}

namespace {

// A printf conversion that takes an argument in turn: "%s", "%-5d", not
// "%1$s" (positional: free to move) nor "%%".
bool takes_argument_in_order(const std::string& p) {
  if (p.size() < 2 || p[0] != '%' || p == "%%") return false;
  size_t i = 1;
  while (i < p.size() && p[i] >= '0' && p[i] <= '9') ++i;
  return !(i > 1 && i < p.size() && p[i] == '$');
}

std::vector<std::string> with_edge_newlines(const std::string& text) {
  std::vector<std::string> out = find_placeholders(text);
  if (!text.empty() && text.front() == '\n') out.push_back("\\n at the start");
  if (text.size() > 1 && text.back() == '\n') out.push_back("\\n at the end");
  return out;
}

}  // namespace

std::vector<PlaceholderProblem> compare_placeholders(const std::string& english, const std::string& chinese) {
  const std::vector<std::string> want = with_edge_newlines(english);
  const std::vector<std::string> have = with_edge_newlines(chinese);
  std::map<std::string, int> balance;  // > 0: missing from the Chinese; < 0: extra in it
  for (const auto& p : want) ++balance[p];
  for (const auto& p : have) --balance[p];
  std::vector<PlaceholderProblem> out;
  // In the English order, then the extras in the Chinese order, so that a
  // report reads like the strings.
  for (const auto& p : want)
    if (balance[p] > 0) {
      out.push_back({PlaceholderFault::kMissing, p});
      --balance[p];
    }
  for (const auto& p : have)
    if (balance[p] < 0) {
      out.push_back({PlaceholderFault::kExtra, p});
      ++balance[p];
    }
  if (!out.empty()) return out;
  std::vector<std::string> a, b;
  for (const auto& p : want)
    if (takes_argument_in_order(p)) a.push_back(p);
  for (const auto& p : have)
    if (takes_argument_in_order(p)) b.push_back(p);
  if (a != b) {
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& p : v) s += (s.empty() ? "" : " ") + p;
      return s;
    };
    out.push_back({PlaceholderFault::kReordered, join(a) + " -> " + join(b)});
  }
  return out;
}

PoCheck check_placeholders(const data::PoCatalog& catalog) {
  PoCheck check;
  check.entries = catalog.entries.size();
  for (const data::PoEntry& e : catalog.entries) {
    if (e.is_header()) continue;
    if (e.obsolete) {
      ++check.obsolete;
      continue;
    }
    if (e.has_flag("fuzzy")) {
      ++check.fuzzy;
      continue;
    }
    if (!e.is_translated()) {
      ++check.untranslated;
      continue;
    }
    ++check.translated;
    for (size_t form = 0; form < e.msgstr.size(); ++form) {
      PoItem item;
      item.entry = &e;
      item.form = form;
      item.english = e.msgid_plural ? *e.msgid_plural : e.msgid;
      item.chinese = e.msgstr[form];
      item.problems = compare_placeholders(item.english, item.chinese);
      check.items.push_back(std::move(item));
    }
  }
  return check;
}

}  // namespace nmt::eval
