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
    case PlaceholderFault::kChanged: return "changed";
  }
  return "?";
}

namespace {

// A string's placeholders as a printf call reads them: the arguments by
// number (a positional "%2$s" is argument 2, a plain "%s" the next one in
// turn), and every other placeholder by its text.
struct Parsed {
  std::map<int, PrintfArgument> args;  // the first conversion of each argument
  std::vector<std::string> types;        // the argument types in the order they appear
  std::vector<std::string> conversions;  // ... and the conversions, as written without positions
  bool positional = false;
  std::vector<std::string> other;      // non-printf placeholders, and a newline at either end
};

Parsed parse(const std::string& text) {
  Parsed r;
  int next = 0;
  for (const std::string& p : find_placeholders(text)) {
    PrintfArgument a;
    if (!parse_printf_argument(p, &a)) {
      r.other.push_back(p);
      continue;
    }
    const int k = a.position > 0 ? a.position : ++next;
    r.positional = r.positional || a.position > 0;
    r.types.push_back(a.type);
    r.conversions.push_back(a.conversion);
    r.args.emplace(k, std::move(a));
  }
  if (!text.empty() && text.front() == '\n') r.other.push_back("\\n at the start");
  if (text.size() > 1 && text.back() == '\n') r.other.push_back("\\n at the end");
  return r;
}

}  // namespace

std::vector<PlaceholderProblem> compare_placeholders(const std::string& english, const std::string& chinese) {
  const Parsed en = parse(english), zh = parse(chinese);
  std::vector<PlaceholderProblem> out;
  // Printf arguments: each of the English must be printed, as the same type.
  std::vector<PlaceholderProblem> changed;
  for (const auto& [k, a] : en.args) {
    const auto it = zh.args.find(k);
    if (it == zh.args.end()) out.push_back({PlaceholderFault::kMissing, a.conversion});
    else if (it->second.type != a.type)
      changed.push_back({PlaceholderFault::kChanged,
                         "argument " + std::to_string(k) + ": " + a.conversion + " -> " + it->second.conversion});
  }
  for (const auto& [k, a] : zh.args)
    if (!en.args.count(k)) out.push_back({PlaceholderFault::kExtra, a.conversion});
  // Other placeholders: as a multiset, in the English order, then the extras in the Chinese order.
  std::map<std::string, int> balance;  // > 0: missing from the Chinese; < 0: extra in it
  for (const auto& p : en.other) ++balance[p];
  for (const auto& p : zh.other) --balance[p];
  for (const auto& p : en.other)
    if (balance[p] > 0) {
      out.push_back({PlaceholderFault::kMissing, p});
      --balance[p];
    }
  for (const auto& p : zh.other)
    if (balance[p] < 0) {
      out.push_back({PlaceholderFault::kExtra, p});
      ++balance[p];
    }
  // Types that moved between arguments without positions: the conversions were reordered.
  if (!changed.empty() && out.empty() && !zh.positional) {
    auto sorted = [](std::vector<std::string> v) {
      std::sort(v.begin(), v.end());
      return v;
    };
    if (sorted(en.types) == sorted(zh.types)) {
      auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& c : v) s += (s.empty() ? "" : " ") + c;
        return s;
      };
      return {{PlaceholderFault::kReordered, join(en.conversions) + " -> " + join(zh.conversions)}};
    }
  }
  out.insert(out.end(), changed.begin(), changed.end());
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
