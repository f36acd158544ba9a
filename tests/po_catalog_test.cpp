// The gettext catalog reader (data/po_catalog.h) and what check-po finds
// without a model (eval/po_check.h): placeholders dropped, added or reordered.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/po_catalog.h"
#include "eval/input_fit.h"
#include "eval/po_check.h"
#include "eval/po_rank.h"
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

// The forms GNU gettext's C format checker (msgfmt -c) accepts, taken from
// Debian's git, coreutils and pg_dump catalogs: none is a fault.
TEST(PoCheck, PrintfIsComparedAsMsgfmtComparesIt) {
  using eval::compare_placeholders;
  using eval::PlaceholderFault;
  // A '*' precision reads an int argument of its own, also by position.
  EXPECT_TRUE(compare_placeholders("Invalid pathspec magic '%.*s' in '%s'",
                                   "在路径规格 '%3$s' 中无效的神奇前缀 '%2$.*1$s'").empty());
  EXPECT_TRUE(compare_placeholders("%*d of %s", "%3$s 的 %2$*1$d").empty());
  // <inttypes.h> macros, with positions.
  EXPECT_TRUE(compare_placeholders("failed to truncate to %<PRIdMAX> bytes in output file %s",
                                   "无法将输出文件 %2$s 截断为 %1$<PRIdMAX> 字节").empty());
  EXPECT_TRUE(compare_placeholders("overflow in %<PRIdMAX> * %<PRIdPTR> byte blocks for file %s",
                                   "文件 %3$s 的大小溢出：%1$<PRIdMAX> * %2$<PRIdPTR> 字节的块").empty());
  // Flags (' and glibc's I), %i for %d, %x for %u, %g for %f; glibc's %m reads no argument.
  EXPECT_TRUE(compare_placeholders("%'d files, %u left, %f s", "%Id 个文件，剩 %x，%g 秒").empty());
  EXPECT_TRUE(compare_placeholders("could not open \"%s\" for input: %m", "无法为输入: %2$m打开\"%1$s\"").empty());
  // Not a printf format (strftime's %H, ld's own %T): no conversion is compared.
  EXPECT_TRUE(compare_placeholders("%I:%M:%S %p", "%p %I:%M:%S").empty());
  // A percent sign is no argument.
  EXPECT_TRUE(compare_placeholders("%d%% done", "完成 %d").empty());

  // What msgfmt -c refuses is still found: a type of another size or
  // signedness, a macro for another type, a '*' argument left out.
  auto p = compare_placeholders("%<PRIuMAX> refs in %s", "%2$s 中有 %1$<PRIu32> 个引用");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kChanged);
  EXPECT_EQ(p[0].detail, "argument 1: %<PRIuMAX> -> %<PRIu32>");
  p = compare_placeholders("%ld items", "%d 项");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kChanged);
  p = compare_placeholders("%d items", "%u 项");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kChanged);
  p = compare_placeholders("'%.*s' in '%s'", "'%2$s' 在 '%3$s' 中");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kMissing);
  EXPECT_EQ(p[0].detail, "* of %.*s");
  p = compare_placeholders("cannot read: %m", "无法读取");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].detail, "%m");
  // A conversion the msgid does not have is found even when the msgid has
  // none at all (coreutils' "用法：%s" for "Usage: test EXPRESSION").
  p = compare_placeholders("Usage: test EXPRESSION\n", "用法：%s 表达式\n");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].fault, PlaceholderFault::kExtra);
  EXPECT_EQ(p[0].detail, "%s");
  // A plural form for one n only may leave the number out, not change it.
  EXPECT_TRUE(compare_placeholders("these %<PRIuMAX> refs:", "这个引用：", true, /*strict=*/false).empty());
  EXPECT_EQ(compare_placeholders("these %<PRIuMAX> refs:", "这个引用：", true, /*strict=*/true).size(), 1u);
  EXPECT_EQ(compare_placeholders("these %lu refs:", "%s 个引用：", true, /*strict=*/false).size(), 1u);
}

TEST(PoCheck, OptionNamesAreHintsNotFaults) {
  using eval::compare_placeholders;
  using eval::verbatim_hints;
  // A translator may name the option the msgid describes in words.
  EXPECT_TRUE(compare_placeholders("the force and backup options", "同时指定 --force 和 --backup 选项").empty());
  EXPECT_TRUE(verbatim_hints("the force and backup options", "同时指定 --force 和 --backup 选项").empty());
  // ... but one of the msgid's that the msgstr lacks is worth a look (pg_dump's "---on-conflict-do-nothing").
  const auto h = verbatim_hints("option --on-conflict-do-nothing requires option --inserts",
                                "选项---on-conflict-do-nothing需要选项--inserts");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].detail, "--on-conflict-do-nothing");
  EXPECT_TRUE(compare_placeholders("option --on-conflict-do-nothing requires option --inserts",
                                   "选项---on-conflict-do-nothing需要选项--inserts").empty());
  // E-mail addresses, shell variables and upper-case words in braces are no placeholders.
  EXPECT_TRUE(compare_placeholders("Report bugs to: %s\n", "请向 <%s> 报告软件错误。\n请向 <i18n-zh@googlegroups.com> 报告翻译错误。\n").empty());
  EXPECT_TRUE(compare_placeholders("only ${VARNAME} expansion, {INTEGER} times", "只支持 ${变量名} 扩展，{整数} 次").empty());
}

TEST(PoCheck, PluralFormsUsedForOneNMayLeaveTheNumberOut) {
  const char* text = R"(msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

msgid "The bundle contains this ref:"
msgid_plural "The bundle contains these %<PRIuMAX> refs:"
msgstr[0] "这个归档包中含有这个引用："
msgstr[1] "这个归档包中含有 %<PRIuMAX> 个引用："

msgid "%d file"
msgid_plural "%d files"
msgstr[0] "一个文件"
msgstr[1] "文件"
)";
  const PoCatalog c = parse_po(text, "plural.po");
  EXPECT_EQ(data::plural_forms_often(c), (std::vector<bool>{false, true}));
  const eval::PoCheck check = eval::check_placeholders(c);
  ASSERT_EQ(check.items.size(), 4u);
  EXPECT_TRUE(check.items[0].problems.empty());   // form 0: n = 1 only
  EXPECT_TRUE(check.items[1].problems.empty());
  EXPECT_TRUE(check.items[2].problems.empty());
  ASSERT_EQ(check.items[3].problems.size(), 1u);  // form 1: every other n, the number is needed
  EXPECT_EQ(check.items[3].problems[0].detail, "%d");
  // One form only (Chinese's usual nplurals=1): it must carry everything.
  std::string one = text;
  one.replace(one.find("nplurals=2; plural=(n != 1);"), 28, "nplurals=1; plural=0;");
  EXPECT_EQ(data::plural_forms_often(parse_po(one, "one.po")), (std::vector<bool>{true}));
  // Plural expressions as catalogs write them.
  const auto often = [](const std::string& forms) {
    return data::plural_forms_often(parse_po("msgid \"\"\nmsgstr \"Plural-Forms: " + forms + "\\n\"\n", "h.po"));
  };
  EXPECT_EQ(often("nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);"),
            (std::vector<bool>{true, true, true}));
  EXPECT_EQ(often("nplurals=3; plural=n==1 ? 0 : n==2 ? 1 : 2;"), (std::vector<bool>{false, false, true}));
  EXPECT_TRUE(often("nplurals=2; plural=n >> 1;").empty());  // not understood: no claim
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

// The ranking with a model that knows four messages: it back-translates
// each msgstr it knows to its own msgid, scores a msgid highly (-0.1 per
// token) given its own msgstr and poorly (-3) given any other, and every
// msgid alike (-2) given nothing. Two entries' msgstrs are exchanged, and
// one is cut short.
TEST(PoRank, RanksSwappedAndCutEntriesFirstAndNamesTheExchange) {
  const char* text = R"(msgid ""
msgstr "Content-Type: text/plain; charset=UTF-8\n"

msgid "Open the file"
msgstr "打开文件"

msgid "Close the window now"
msgstr "立即关闭窗口"

msgid "Save the document"
msgstr "删除该目录"

msgid "Delete the directory"
msgstr "保存文档"

msgid "Print the page"
msgstr "打印"
)";
  const PoCatalog c = parse_po(text, "rank.po");
  const eval::PoCheck check = eval::check_placeholders(c);
  ASSERT_EQ(check.items.size(), 5u);
  const std::map<std::string, std::string> own = {{"打开文件", "Open the file"},
                                                  {"立即关闭窗口", "Close the window now"},
                                                  {"保存文档", "Save the document"},
                                                  {"删除该目录", "Delete the directory"},
                                                  {"打印页面", "Print the page"}};
  int calls = 0;
  eval::PoModel model;
  model.translate = [&](const std::vector<std::string>& zh) {
    std::vector<std::string> en;
    for (const auto& z : zh) en.push_back(own.count(z) ? own.at(z) : "Print");
    return en;
  };
  model.score = [&](const std::vector<std::string>& src, const std::vector<std::string>& tgt, bool protect) {
    ++calls;
    EXPECT_FALSE(protect);
    std::vector<eval::PairScore> out;
    for (size_t i = 0; i < src.size(); ++i) {
      const double per_token = src[i].empty() ? -2.0 : own.count(src[i]) && own.at(src[i]) == tgt[i] ? -0.1 : -3.0;
      out.push_back({per_token, tgt[i].size() / 4 + 1});
    }
    return out;
  };
  const auto ranked = eval::rank_translations(check, model, eval::RankBy::kCombined);
  ASSERT_EQ(ranked.size(), 5u);
  EXPECT_EQ(calls, 5);  // msgids, back-translations, priors, rivals both ways: five scoring passes
  // The exchanged pair first, each naming the other; the cut one next; the clean ones last.
  std::set<std::string> first_two{ranked[0].item->english, ranked[1].item->english};
  EXPECT_EQ(first_two, (std::set<std::string>{"Save the document", "Delete the directory"}));
  for (int k : {0, 1}) {
    ASSERT_TRUE(ranked[k].rival.has_value());
    EXPECT_GT(*ranked[k].rival, 0.0);
    ASSERT_NE(ranked[k].rival_item, nullptr);
    EXPECT_NE(ranked[k].rival_item->english, ranked[k].item->english);
    EXPECT_TRUE(first_two.count(ranked[k].rival_item->english));
  }
  EXPECT_EQ(ranked[2].item->english, "Print the page");
  for (size_t k = 1; k < ranked.size(); ++k) EXPECT_LE(ranked[k - 1].key, ranked[k].key);
  EXPECT_NEAR(ranked[4].score, -0.1, 1e-12);
  EXPECT_NEAR(ranked[4].support, 1.9, 1e-12);  // -0.1 given its msgstr, -2 given nothing
  EXPECT_EQ(eval::parse_rank_by("gap"), eval::RankBy::kGap);
  EXPECT_THROW(eval::parse_rank_by("best"), std::invalid_argument);
  // Another key, another order: by score the cut entry (scored -3) ties the swapped ones.
  for (const auto& r : eval::rank_translations(check, model, eval::RankBy::kScore)) EXPECT_EQ(r.key, r.score);
}

TEST(PoCheck, FormFitMeasuresLengthAndForeignWords) {
  using eval::form_fit;
  // 8 English letters; 4 Chinese characters count as 8: log(9 / 9).
  EXPECT_NEAR(form_fit("Open file", "打开文件").length, 0.0, 1e-12);
  // Half of it: log(5 / 9). Full-width punctuation is Chinese script; white space does not count.
  EXPECT_NEAR(form_fit("Open file", "打开").length, std::log(5.0 / 9.0), 1e-12);
  EXPECT_NEAR(form_fit("Open file", " 打开 文件 ").length, 0.0, 1e-12);
  EXPECT_NEAR(form_fit("Open file.", "打开文件。").length, std::log(11.0 / 10.0), 1e-12);
  // Latin letters and digits count once.
  EXPECT_NEAR(form_fit("Use xz", "使用 xz").length, std::log(7.0 / 6.0), 1e-12);

  // Latin words of the msgstr that the msgid lacks; case and sentence punctuation ignored.
  EXPECT_EQ(form_fit("Cannot open foo.txt", "无法打开 FOO.TXT。").foreign, 0.0);
  EXPECT_EQ(form_fit("See the GNU manual.", "参见 gnu 手册").foreign, 0.0);
  EXPECT_EQ(form_fit("Cannot open foo.txt", "无法打开 bar.txt").foreign, 1.0);
  EXPECT_EQ(form_fit("Use xz or gzip", "使用 xz 或 bzip2").foreign, 0.5);
  // Anywhere in the msgid: part of an identifier, a singular of a plural.
  EXPECT_EQ(form_fit("with_query", "with查询语句(with_query)").foreign, 0.0);
  EXPECT_EQ(form_fit("restoring tables WITH OIDS", "还原带 OID 的表").foreign, 0.0);
  // An option keeps its dash: "-D" is not in "you have too many ')'", though "D" is.
  EXPECT_EQ(form_fit("Empty argument to the -D option.", "-D 选项的参数列表为空").foreign, 0.0);
  EXPECT_EQ(form_fit("you have too many ')'", "-D 选项的参数列表为空").foreign, 1.0);
  EXPECT_EQ(form_fit("Open file", "打开文件").foreign, 0.0);  // no Latin words at all
  // Placeholders are not words (their own check compares them); one letter is not a word.
  EXPECT_EQ(form_fit("%s does not exist", "%s 不存在").foreign, 0.0);
  EXPECT_EQ(form_fit("Hello %(name)s", "你好 %(user)s").foreign, 0.0);
  EXPECT_EQ(form_fit("Press y", "按 n").foreign, 0.0);
  // Bytes that are not UTF-8 are counted, not a failure.
  EXPECT_TRUE(std::isfinite(form_fit("Open", std::string("\xff\xfe") + "打开").length));
}

TEST(PoCheck, CombinedScoreLowersShortLongAndForeignTranslations) {
  using eval::combined_score;
  using eval::form_fit;
  const double gap = -1.5;
  const double fit = combined_score(gap, 0.0, form_fit("Cannot open the file", "无法打开该文件"));
  EXPECT_LT(combined_score(gap, 0.0, form_fit("Cannot open the file", "无法")), fit - 1.0);  // truncated
  EXPECT_LT(combined_score(gap, 0.0, form_fit("Open", "无法打开该文件并退出程序")), fit - 1.0);  // far too long
  EXPECT_LT(combined_score(gap, 0.0, form_fit("Cannot open the file", "无法打开 gzip 文件")), fit - 1.0);
  // Monotone in the gap, and never above it.
  EXPECT_LT(combined_score(gap - 1.0, 0.0, form_fit("Cannot open the file", "无法打开该文件")), fit);
  EXPECT_LE(fit, gap);
  // Another msgid the model prefers lowers it; one it likes less does not raise it.
  EXPECT_LT(combined_score(gap, 2.0, form_fit("Cannot open the file", "无法打开该文件")), fit - 1.0);
  EXPECT_EQ(combined_score(gap, -3.0, form_fit("Cannot open the file", "无法打开该文件")), fit);
}

TEST(PoCheck, RivalCandidatesAreTheMsgidsABackTranslationResembles) {
  using eval::rival_candidates;
  const std::vector<std::string> english = {
      "Replication",                     // 0
      "Tablespace",                      // 1
      "Could not open file %s",          // 2
      "Stable",                          // 3
      "could not open file %s",          // 4: 2's letters, another case
      "Name",                            // 5
      "user_name",                       // 6
      "Tablespace",                      // 7: 1's text again
      "Show the list of functions",      // 8
  };
  // Back-translations of msgstrs: "Table Space" (spelt apart) finds Tablespace
  // once, though two entries have it; the entry's own msgid is never a rival.
  const auto r = rival_candidates({"Table Space", "Table Space", "File could not be opened", "List of functions",
                                   "the user name", "zzz qqq"},
                                  english, {3, 1, 0, 0, 6, 0}, 2);
  ASSERT_EQ(r.size(), 6u);
  ASSERT_FALSE(r[0].empty());
  EXPECT_EQ(r[0][0], 1u);
  EXPECT_EQ(std::count(r[0].begin(), r[0].end(), 7u), 0);  // one rival per text
  EXPECT_EQ(std::count(r[0].begin(), r[0].end(), 3u), 0);  // its own msgid ("Stable", a near spelling)
  EXPECT_EQ(std::count(r[1].begin(), r[1].end(), 1u) + std::count(r[1].begin(), r[1].end(), 7u), 0);
  // At most k, best first: both file messages resemble the query; they are one text in letters, but two texts.
  ASSERT_EQ(r[2].size(), 2u);
  EXPECT_TRUE((r[2][0] == 2u && r[2][1] == 4u) || (r[2][0] == 4u && r[2][1] == 2u));
  ASSERT_FALSE(r[3].empty());
  EXPECT_EQ(r[3][0], 8u);
  // "Name" is part of "user_name": a msgstr may rightly translate either, so it is no rival.
  for (const size_t j : r[4]) EXPECT_NE(j, 5u);
  EXPECT_TRUE(r[5].empty());  // shares no trigram with any msgid
  // 2 and 4 hold each other's letters: neither is the other's rival.
  const auto dup = rival_candidates({"could not open the file"}, english, {2}, 3);
  for (const size_t j : dup[0]) EXPECT_NE(j, 4u);
}

// A model's fit judged on its input: unknown tokens beyond 5% (a toy model
// reading software messages: over 40%) or back-translations at a median chrF
// under 20 are named; a model that fits (0.1% unknown, chrF 45) passes.
TEST(InputFit, UnknownTokensAndFarBackTranslationsAreNamed) {
  eval::TokenCounts fits;
  fits.add(std::vector<int64_t>(999, 7), 1);
  fits.add({1}, 1);
  EXPECT_NEAR(fits.unknown_share(), 0.001, 1e-12);
  EXPECT_EQ(eval::input_fit_problems(fits), "");
  EXPECT_EQ(eval::input_fit_problems(fits, 45.0, 500), "");
  eval::TokenCounts toy;
  toy.add({1, 5, 1, 6, 1, 1, 9}, 1);  // 4 of 7 unknown
  EXPECT_EQ(eval::input_fit_problems(toy).rfind("its vocabulary lacks 57% of the input's 7 tokens", 0), 0u)
      << eval::input_fit_problems(toy);
  const std::string far = eval::input_fit_problems(fits, 6.3, 511);
  EXPECT_NE(far.find("median chrF 6.3 over 511 entries"), std::string::npos) << far;
  EXPECT_NE(eval::input_fit_problems(toy, 6.3, 511).find("; the back-translations are far"), std::string::npos);
  EXPECT_EQ(eval::median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(eval::median({4.0, 1.0, 2.0, 3.0}), 2.5);
  EXPECT_EQ(eval::median({}), 0.0);
}

}  // namespace
}  // namespace nmt
