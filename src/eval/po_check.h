// What nmt check-po finds in a Chinese gettext catalog without the model:
// placeholders of the English msgid that the Chinese msgstr drops, adds or
// reorders. The model's part (back-translation, scores) is in the CLI, which
// feeds its figures back into PoFinding for ranking. Plain C++17, no LibTorch.
#pragma once

#include <string>
#include <vector>

#include "data/po_catalog.h"

namespace nmt::eval {

enum class PlaceholderFault { kMissing, kExtra, kReordered };
const char* fault_name(PlaceholderFault fault);  // "missing", "extra", "reordered"

struct PlaceholderProblem {
  PlaceholderFault fault;
  std::string detail;  // the placeholder, or for kReordered "%s %d -> %d %s"
};

// english: the msgid (msgid_plural for a plural entry's forms); chinese: a msgstr.
// Placeholders are those of find_placeholders, plus a newline at the start or
// the end (msgfmt -c checks those too). Printf conversions without positions
// ("%s", not "%1$s") must keep their order: the arguments come in that order.
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
