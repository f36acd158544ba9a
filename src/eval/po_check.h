// What nmt check-po finds in a Chinese gettext catalog without the model:
// placeholders of the English msgid that the Chinese msgstr drops, adds or
// reorders. The model's part (back-translation, scores) is in the CLI, which
// feeds its figures back into PoFinding for ranking. Plain C++17, no LibTorch.
#pragma once

#include <string>
#include <vector>

#include "data/po_catalog.h"

namespace nmt::eval {

enum class PlaceholderFault { kMissing, kExtra, kReordered, kChanged };
const char* fault_name(PlaceholderFault fault);  // "missing", "extra", "reordered", "changed"

struct PlaceholderProblem {
  PlaceholderFault fault;
  std::string detail;  // the placeholder; kReordered: "%s %d -> %d %s"; kChanged: "argument 2: %d -> %s"
};

// english: the msgid (msgid_plural for a plural entry's forms); chinese: a msgstr.
// Printf conversions are compared as printf reads them, argument by argument:
// "%2$s 的 %1$d" translates "%d of %s" correctly, and every argument of the
// English must be printed as the same type (length and conversion: "%lu" is
// not "%d"; flags and width may differ). Types that moved between arguments
// without positions are "reordered". Other placeholders (find_placeholders,
// plus a newline at the start or the end, which msgfmt -c checks too) are
// compared as a multiset.
std::vector<PlaceholderProblem> compare_placeholders(const std::string& english, const std::string& chinese);

// One translation of a checked entry: an entry that is used at run time
// (PoEntry::is_translated), one item per msgstr form.
struct PoItem {
  const data::PoEntry* entry = nullptr;
  size_t form = 0;      // msgstr[form]
  std::string english;  // what it translates: msgid, or msgid_plural for a plural entry
  std::string chinese;  // msgstr[form]
  std::vector<PlaceholderProblem> problems;
};

struct PoCheck {
  std::vector<PoItem> items;
  size_t entries = 0;     // in the catalog, header and obsolete ones included
  size_t translated = 0;  // entries checked
  size_t fuzzy = 0, untranslated = 0, obsolete = 0;
};

// The catalog's translated entries with their placeholder problems.
PoCheck check_placeholders(const data::PoCatalog& catalog);

}  // namespace nmt::eval
