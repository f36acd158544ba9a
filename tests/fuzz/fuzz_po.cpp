// The gettext catalog reader (data/po_catalog.h) and check-po's placeholder
// comparison (eval/po_check.h). Input: a .po file's bytes. Expected failures
// are InputError; any other exception escapes and counts as a crash.
// Properties checked on a catalog that parses: every string is UTF-8, an
// entry's line is within the file, writing a msgstr with po_escape and
// reading it back gives it unchanged, and the placeholder check and the
// sentinel mapping take every entry (restoring a masked msgid gives it back
// whenever it has no numbered printf conversion), every translation's form
// fit is finite with its foreign share in [0, 1], and its rivals are other
// entries' texts, at most k of them.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/placeholder_mask.h"
#include "data/po_catalog.h"
#include "eval/po_check.h"
#include "fuzz_util.h"
#include "util/errors.h"
#include "util/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nmt;
  const std::string input(reinterpret_cast<const char*>(data), size);
  data::PoCatalog catalog;
  try {
    catalog = data::parse_po(input, "fuzz.po");
  } catch (const InputError&) {
    return 0;
  }
  const int lines = 1 + static_cast<int>(std::count(input.begin(), input.end(), '\n'));
  for (const data::PoEntry& e : catalog.entries) {
    fuzz::check(e.line >= 1 && e.line <= lines, "entry line out of the file");
    fuzz::check(utf8::valid(e.msgid), "msgid not UTF-8");
    for (const std::string& s : e.msgstr) {
      fuzz::check(utf8::valid(s), "msgstr not UTF-8");
      const data::PoCatalog again =
          data::parse_po("msgid \"x\"\nmsgstr \"" + data::po_escape(s) + "\"\n", "again.po");
      fuzz::check(again.entries.size() == 1 && again.entries[0].msgstr.at(0) == s, "po_escape does not round-trip");
    }
    const data::MaskedSource m = data::mask_source(e.msgid);
    if (e.msgid.find('$') == std::string::npos)
      fuzz::check(data::restore_target(m.text, m) == e.msgid, "masking and restoring changed a msgid");
  }
  const eval::PoCheck check = eval::check_placeholders(catalog);
  std::vector<std::string> english, chinese;
  std::vector<size_t> self;
  for (const eval::PoItem& item : check.items) {
    const eval::FormFit f = eval::form_fit(item.english, item.chinese);
    fuzz::check(std::isfinite(f.length) && f.foreign >= 0 && f.foreign <= 1, "form_fit out of range");
    fuzz::check(std::isfinite(eval::combined_score(0.0, 1.0, f)), "combined_score not finite");
    self.push_back(english.size());
    english.push_back(item.english);
    chinese.push_back(item.chinese);
  }
  // The msgstrs stand in for back-translations.
  const auto rivals = eval::rival_candidates(chinese, english, self, 3);
  fuzz::check(rivals.size() == chinese.size(), "rival_candidates: one list per query");
  for (size_t q = 0; q < rivals.size(); ++q) {
    fuzz::check(rivals[q].size() <= 3, "rival_candidates: more than k");
    for (const size_t j : rivals[q])
      fuzz::check(j < english.size() && english[j] != english[q], "rival_candidates: out of range, or its own text");
  }
  return 0;
}
