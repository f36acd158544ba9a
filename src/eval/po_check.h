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
// Printf conversions are compared as GNU gettext's C format checker (msgfmt
// -c) compares them, argument by argument: "%2$s 的 %1$d" translates "%d of
// %s" correctly, "%3$s ... %2$.*1$s" translates "%.*s ... %s" (a '*' reads
// an int argument of its own), "%1$<PRIuMAX>" is "%<PRIuMAX>"; every
// argument of the English must be read as the same type ("%lu" is not "%d",
// "%x" is "%u", "%i" is "%d"; flags and width may differ). Types that moved
// between arguments without positions are "reordered". Python's %(name)s,
// brace fields, markup and character references (find_placeholders), and a
// newline at the start or the end (which msgfmt -c checks too), are
// compared as a multiset. Option names are not compared here: see
// verbatim_hints. printf_format false (an entry flagged no-c-format), or
// an English that is no printf format (a '%' that starts no directive, as
// in strftime's "%H:%M"; gettext then compares nothing either): percent
// signs are text, only the other placeholders are compared. strict
// false (a plural form used for one n only, such as n = 1): the msgstr may
// leave out what the English has (the number), but adds or changes nothing.
std::vector<PlaceholderProblem> compare_placeholders(const std::string& english, const std::string& chinese,
                                                     bool printf_format = true, bool strict = true);

// Words of the msgid that a translation keeps verbatim (option names such
// as --inserts) that the msgstr lacks: a hint, not a fault (msgfmt -c
// checks none of them; a translator may add some, which is no hint).
std::vector<PlaceholderProblem> verbatim_hints(const std::string& english, const std::string& chinese);

// One translation of a checked entry: an entry that is used at run time
// (PoEntry::is_translated), one item per msgstr form; the forms of a
// plural entry that hold the same text, with the same findings, are one
// item (listed and ranked once, as msgstr[0,1]).
struct PoItem {
  const data::PoEntry* entry = nullptr;
  size_t form = 0;      // msgstr[form], the first of `forms`
  std::vector<size_t> forms;  // every form this item stands for (a plural entry's), in order
  std::string english;  // what it translates: msgid, or msgid_plural for a plural entry
  std::string chinese;  // msgstr[form]
  std::vector<PlaceholderProblem> problems;
  std::vector<PlaceholderProblem> hints;  // verbatim_hints
};

struct PoCheck {
  std::vector<PoItem> items;
  size_t entries = 0;     // in the catalog, header and obsolete ones included
  size_t translated = 0;  // entries checked
  size_t fuzzy = 0, untranslated = 0, obsolete = 0;
};

// The catalog's translated entries with their placeholder problems.
PoCheck check_placeholders(const data::PoCatalog& catalog);

// The same items with one per distinct translation: a plural entry's forms
// of equal text become one item (their forms together, the first one's
// findings), as the model's ranking judges a text, not a form. Without this,
// forms whose findings differ (a form for n = 1 may leave the number out)
// would be ranked twice with the same figures.
PoCheck distinct_texts(const PoCheck& check);

// What a msgstr's form says about its msgid, without the model. A msgstr cut
// short is short for its msgid; one that belongs to another entry is often
// the wrong length, and keeps Latin words (commands, names, units) that this
// msgid does not have. Translators copy such words verbatim, so a clean
// translation's Latin words are nearly always in its msgid.
struct FormFit {
  // log((latin + 2 * cjk + 1) / (english + 1)), counting code points that are
  // not white space: cjk those of Chinese script and full-width forms, latin
  // the others. A Chinese character stands for about two English letters in
  // these catalogs; a faithful translation is near the dev catalogs' median
  // (kLengthCentre in po_check.cpp), a truncated one well below it.
  double length = 0;
  // Share of the msgstr's Latin words that appear nowhere in the msgid, case
  // ignored (a word: letters, digits, '_', '.', '-', at least two characters,
  // not part of a placeholder, an option's dash included: "-D"; "OID" is in
  // "WITH OIDS"); 0 when the msgstr has none.
  double foreign = 0;
};
FormFit form_fit(const std::string& english, const std::string& chinese);

// Rivals: the msgids a msgstr may really belong to. A msgstr moved to the
// wrong entry (two entries swapped, a catalog shifted by one) is nearly
// always the translation of another msgid of the same catalog, and its
// back-translation shares words and spellings with that msgid. For each
// query (a back-translation), the indices of up to `k` of `english` whose
// text is most alike, best first: cosine of tf-idf weighted character
// trigrams of the lower-cased words ("tablespace" is near "Table Space").
// english[exclude[q]]'s own text is never a rival of query q, nor a text
// whose letters and digits (case ignored) are part of its own or hold its
// own whole ("Column" for "join_column"), nor an entry that shares no
// trigram with the query.
std::vector<std::vector<size_t>> rival_candidates(const std::vector<std::string>& queries,
                                                  const std::vector<std::string>& english,
                                                  const std::vector<size_t>& exclude, size_t k);

// check-po's default ranking key (lower = more suspect): the model's gap (the
// msgid's mean log-probability per token given the msgstr, minus that of the
// model's own back-translation), lowered for a msgstr too short or too long
// for the msgid, for foreign words, and when it looks exchanged with another
// entry's msgstr (`rival`: how much the mean log-probabilities of both
// msgids rise when each is scored with the other's msgstr; only its positive
// part counts). Weights in the gap's units, fitted on injected faults in dev
// catalogs (bench/check_po_faults.py fit).
double combined_score(double gap, double rival, const FormFit& fit);

}  // namespace nmt::eval
