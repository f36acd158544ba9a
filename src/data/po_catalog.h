// A reader for gettext catalogs (.po): the entries with their context,
// singular and plural ids, translations, flags and line numbers. What it
// reads: the header entry, translator/extracted/reference/flag/previous
// comments, msgctxt, msgid, msgid_plural with msgstr[n], strings continued
// over several lines, C escapes, and obsolete (#~) entries. Anything else is
// an InputError "FILE:LINE: what is wrong", as msgfmt reports it.
// Plain C++17, no LibTorch.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace nmt::data {

struct PoEntry {
  int line = 0;                              // of the entry's msgid keyword
  std::optional<std::string> context;        // msgctxt
  std::string msgid;
  std::optional<std::string> msgid_plural;
  std::vector<std::string> msgstr;           // one, or msgstr[0..n-1] of a plural entry
  std::vector<std::string> flags;            // "#, c-format, fuzzy" -> {"c-format", "fuzzy"}
  bool obsolete = false;                     // #~ entries: kept by tools, never used

  bool has_flag(const std::string& flag) const;
  bool is_header() const { return msgid.empty() && !context; }
  // Used at run time: not the header, not obsolete, not fuzzy, every msgstr non-empty.
  bool is_translated() const;
};

struct PoCatalog {
  std::string name;              // the path it was read from, for messages
  std::vector<PoEntry> entries;  // in file order, the header included
};

// Parses `text`, naming `name` in errors. The text must be UTF-8, and a
// header that declares a charset must declare UTF-8 (msgunfmt and msgcat
// --to-code=UTF-8 convert others).
PoCatalog parse_po(const std::string& text, const std::string& name);

// Reads and parses the file at `path` (InputError when it cannot be read).
PoCatalog read_po(const std::string& path);

// For each plural form of the header's Plural-Forms ("nplurals=2;
// plural=(n != 1);"), whether it is used "often": for at least 5 of n =
// 0 .. 1000, as msgfmt -c decides whether a form's translation must carry
// every argument of msgid_plural (a form for n = 1 alone may leave out the
// number). Empty when the catalog has no such header or it cannot be read.
std::vector<bool> plural_forms_often(const PoCatalog& catalog);

// The C escapes of a .po string for `text` ("\n" for a newline, "\"", "\\"
// and the rest), the inverse of what parse_po decodes.
std::string po_escape(const std::string& text);

}  // namespace nmt::data
