// The gettext catalog reader (data/po_catalog.h) and what check-po finds
// without a model (eval/po_check.h): placeholders dropped, added or reordered.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/po_catalog.h"
#include "eval/po_check.h"
#include "util/errors.h"

namespace nmt {
namespace {

using data::parse_po;
using data::PoCatalog;

const char* const kCatalog = R"(# Chinese translations for demo.
# Copyright (C) 2026
#
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=1; plural=0;\n"

#. TRANSLATORS: a file name follows
#: src/main.c:10 src/main.c:20
#, c-format
msgid "cannot open %s"
msgstr "无法打开 %s"

#, fuzzy, c-format
msgid "Copy %d files"
msgstr "复制 %d 个文件"

msgctxt "menu"
msgid "Open"
msgstr "打开"

msgid "Open"
msgstr "打开文件"

#, c-format
msgid "%d byte"
msgid_plural "%d bytes"
msgstr[0] "%d 字节"

msgid ""
"Usage: demo [OPTION]...\n"
"  -h  show \"help\"\t\\ \101\x42"
msgstr "用法：demo [选项]...\n  -h  显示“帮助”"

msgid "Not yet"
msgstr ""

#~ msgid "Old message"
#~ msgstr "旧消息"
)";

TEST(PoCatalog, ReadsEntriesContextsPluralsFlagsEscapesAndObsoleteOnes) {
  const PoCatalog c = parse_po(kCatalog, "demo.po");
  ASSERT_EQ(c.entries.size(), 9u);
  EXPECT_TRUE(c.entries[0].is_header());
  EXPECT_NE(c.entries[0].msgstr[0].find("charset=UTF-8\n"), std::string::npos);

  const auto& open = c.entries[1];
  EXPECT_EQ(open.msgid, "cannot open %s");
  EXPECT_EQ(open.msgstr, std::vector<std::string>{"无法打开 %s"});
  EXPECT_EQ(open.line, 13);
  EXPECT_TRUE(open.has_flag("c-format"));
  EXPECT_TRUE(open.is_translated());

  EXPECT_TRUE(c.entries[2].has_flag("fuzzy"));
  EXPECT_FALSE(c.entries[2].is_translated());

  ASSERT_TRUE(c.entries[3].context.has_value());
  EXPECT_EQ(*c.entries[3].context, "menu");
  EXPECT_FALSE(c.entries[4].context.has_value());  // same msgid, no context: a different message

  const auto& plural = c.entries[5];
  ASSERT_TRUE(plural.msgid_plural.has_value());
  EXPECT_EQ(*plural.msgid_plural, "%d bytes");
  EXPECT_EQ(plural.msgstr, std::vector<std::string>{"%d 字节"});

  EXPECT_EQ(c.entries[6].msgid, "Usage: demo [OPTION]...\n  -h  show \"help\"\t\\ AB");
  EXPECT_EQ(c.entries[6].line, 32);

  EXPECT_FALSE(c.entries[7].is_translated());  // empty msgstr
  EXPECT_TRUE(c.entries[8].obsolete);
  EXPECT_EQ(c.entries[8].msgid, "Old message");
  EXPECT_FALSE(c.entries[8].is_translated());
}

TEST(PoCatalog, EscapesRoundTrip) {
  const std::string text = "a\"b\\c\nd\te\x01";
  const PoCatalog c = parse_po("msgid \"x\"\nmsgstr \"" + data::po_escape(text) + "\"\n", "t.po");
  EXPECT_EQ(c.entries.at(0).msgstr.at(0), text);
}

TEST(PoCatalog, CrlfLinesAndAByteOrderMarkAreRead) {
  const PoCatalog c = parse_po("\xEF\xBB\xBFmsgid \"a\"\r\nmsgstr \"b\"\r\n", "t.po");
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_EQ(c.entries[0].msgstr[0], "b");
}

// Each bad catalog gives "FILE:LINE: what", the line where it goes wrong.
TEST(PoCatalog, BadCatalogsNameTheFileAndLine) {
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {"msgid \"a\"\nmsgstr \"b\n", "bad.po:2: a string without its closing quote"},
      {"msgid \"a\"\nmsgstr \"b\" x\n", "bad.po:2: text after the closing quote"},
      {"msgid \"a\"\nmsgstr \"\\q\"\n", "bad.po:2: unknown escape '\\q'"},
      {"msgid \"a\"\nmsgid \"b\"\nmsgstr \"c\"\n", "bad.po:2: msgid without a msgstr before it"},
      {"msgstr \"c\"\n", "bad.po:1: msgstr without a msgid"},
      {"msgid \"a\"\nmsgstr \"b\"\nmsgstr \"c\"\n", "bad.po:3: a second msgstr"},
      {"msgid \"a\"\nmsgid_plural \"as\"\nmsgstr \"c\"\n", "bad.po:3: a plural entry needs msgstr[0]"},
      {"msgid \"a\"\nmsgid_plural \"as\"\nmsgstr[1] \"c\"\n", "bad.po:3: 'msgstr[1]': expected msgstr[0]"},
      {"msgid \"a\"\nmsgstr[0] \"c\"\n", "bad.po:2: 'msgstr[0]' in an entry without msgid_plural"},
      {"msgid \"a\"\n", "bad.po:1: the file ends inside the entry at line 1, which has no msgstr"},
      {"msgid \"a\"\n# note\nmsgstr \"b\"\n", "bad.po:2: a comment inside an entry"},
      {"\"stray\"\n", "bad.po:1: a string outside an entry"},
      {"msgid \"a\"\nmsgstr \"b\"\nmsgfoo \"c\"\n", "bad.po:3: unknown keyword 'msgfoo'"},
      {"msgid\nmsgstr \"b\"\n", "bad.po:1: 'msgid' must be followed by a quoted string"},
      {"msgid \"a\"\nmsgstr \"b\"\n\nmsgid \"a\"\nmsgstr \"c\"\n",
       "bad.po:4: duplicate message definition (first at line 1)"},
      {"msgid \"a\"\nmsgstr \"\xff\"\n", "bad.po:2: not UTF-8"},
      {"msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=GB2312\\n\"\n",
       "bad.po:1: the header declares charset GB2312"},
      {"msgid \"a\"\nmsgctxt \"c\"\nmsgstr \"b\"\n", "bad.po:2: msgctxt must come before msgid"},
      {"\nmsgid \"a\"\nmsgstr \"\\xff\"\n", "bad.po:2: its escapes make the msgstr not UTF-8"},
  };
  for (const auto& c : cases) {
    try {
      parse_po(c.text, "bad.po");
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(c.message, 0), 0u) << e.what() << "\nwanted: " << c.message;
    }
  }
}

TEST(PoCheck, PlaceholdersMissingExtraAndReordered) {
  using eval::compare_placeholders;
  using eval::PlaceholderFault;
  EXPECT_TRUE(compare_placeholders("cannot open %s: %s", "无法打开 %s：%s").empty());
  EXPECT_TRUE(compare_placeholders("%1$s of %2$d", "%2$d 的 %1$s").empty());  // positions: free to move
  EXPECT_TRUE(compare_placeholders("%s of %d", "%2$d 的 %1$s").empty());      // plain in English, numbered in Chinese
  EXPECT_TRUE(compare_placeholders("%-5lu items", "%lu 项").empty());          // width may differ

  auto p = compare_placeholders("cannot open %s: %s", "无法打开 %s");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kMissing);
  EXPECT_EQ(p[0].detail, "%s");

  p = compare_placeholders("<b>Name</b>", "<b>名称</b> %d");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kExtra);
  EXPECT_EQ(p[0].detail, "%d");

  p = compare_placeholders("%s has %d items", "%d 项在 %s 中");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kReordered);
  EXPECT_EQ(p[0].detail, "%s %d -> %d %s");

  p = compare_placeholders("%d files in %s", "%s 个文件在 %s");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kChanged);
  EXPECT_EQ(p[0].detail, "argument 1: %d -> %s");

  p = compare_placeholders("%s: %s", "%2$s");  // argument 1 never printed
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kMissing);

  p = compare_placeholders("\nUsage:\n", "用法：");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].detail, "\\n at the start");
  EXPECT_EQ(p[1].detail, "\\n at the end");

  p = compare_placeholders("Hello %(name)s &amp; {0}", "你好 %(name)s &amp; {1}");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].detail, "{0}");
  EXPECT_EQ(p[1].detail, "{1}");
}

TEST(PoCheck, ChecksTranslatedEntriesOnlyAndEveryPluralForm) {
  const PoCatalog c = parse_po(kCatalog, "demo.po");
  const eval::PoCheck check = eval::check_placeholders(c);
  EXPECT_EQ(check.entries, 9u);
  EXPECT_EQ(check.translated, 5u);  // cannot open, Open x2, %d byte, Usage
  EXPECT_EQ(check.fuzzy, 1u);
  EXPECT_EQ(check.untranslated, 1u);
  EXPECT_EQ(check.obsolete, 1u);
  ASSERT_EQ(check.items.size(), 5u);
  EXPECT_EQ(check.items[3].english, "%d bytes");  // a plural entry's forms translate msgid_plural
  for (const auto& item : check.items) EXPECT_TRUE(item.problems.empty()) << item.english;
}

}  // namespace
}  // namespace nmt
