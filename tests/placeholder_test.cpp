// Placeholders (data/placeholders.h, eval/placeholders.h): the tokens a translation must carry
// over verbatim (printf conversions, {braces}, markup tags, --options) and
// the report that counts them against the source and the reference.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "data/placeholder_mask.h"
#include "data/text_io.h"
#include "eval/placeholders.h"

namespace nmt::eval {
namespace {

using data::find_placeholder_spans;
using data::find_placeholders;
using data::parse_printf_argument;
using data::placeholder_kind;
using data::PrintfArgument;

TEST(Placeholders, FindsPrintfBracesTagsAndOptions) {
  using V = std::vector<std::string>;
  EXPECT_EQ(find_placeholders("%1$s：读入 %3$lu 字节时，在 %2$s 处"), (V{"%1$s", "%3$lu", "%2$s"}));
  EXPECT_EQ(find_placeholders("100%% done, %'d files, %-5.2f s, %zu"), (V{"%%", "%'d", "%-5.2f", "%zu"}));
  EXPECT_EQ(find_placeholders("Hello {name}, {0} and {not closed"), (V{"{name}", "{0}"}));
  EXPECT_EQ(find_placeholders("<b>Bold</b> <span weight=\"bold\">x</span> <file> <br/>"),
            (V{"<b>", "</b>", "<span weight=\"bold\">", "</span>", "<br/>"}));
  EXPECT_EQ(find_placeholders("use --no-color or --help; not a-b--c or 50% -- off"),
            (V{"--no-color", "--help"}));
  EXPECT_TRUE(find_placeholders("no placeholders here: 50 % ok").empty());
  // gettext's forms: '*' and '*m$' widths and precisions, <inttypes.h> macros, glibc's %m and I flag.
  EXPECT_EQ(find_placeholders("'%2$.*1$s' at %<PRIuMAX>, %3$<PRId64>; %*d %Id: %m"),
            (V{"%2$.*1$s", "%<PRIuMAX>", "%3$<PRId64>", "%*d", "%Id", "%m"}));
  // Not placeholders: an e-mail address in angle brackets, ${VAR}, {UPPER}, tar's "--Long Link--".
  EXPECT_TRUE(find_placeholders("<i18n-zh@googlegroups.com> ${VARNAME} {INTEGER} --Long Link--").empty());
  EXPECT_EQ(find_placeholders("{0:>5} {name!r} {x.y} {ID}"), (V{"{0:>5}", "{name!r}", "{x.y}"}));
}

TEST(Placeholders, PrintfArgumentsAreReadAsGettextReadsThem) {
  PrintfArgument a;
  ASSERT_TRUE(parse_printf_argument("%3$.*1$s", &a));
  EXPECT_EQ(a.position, 3);
  EXPECT_EQ(a.conversion, "%.*s");
  EXPECT_EQ(a.type, "string");
  EXPECT_EQ(a.stars, (std::vector<int>{1}));
  ASSERT_TRUE(parse_printf_argument("%<PRIuMAX>", &a));
  EXPECT_EQ(a.type, "unsigned intmax_t");
  ASSERT_TRUE(parse_printf_argument("%ju", &a));
  EXPECT_EQ(a.type, "unsigned intmax_t");  // %ju and %<PRIuMAX> read the same type
  ASSERT_TRUE(parse_printf_argument("%2$-5lx", &a));
  EXPECT_EQ(a.conversion, "%-5lx");
  EXPECT_EQ(a.type, "unsigned long");
  EXPECT_FALSE(parse_printf_argument("%m", &a));
  EXPECT_FALSE(parse_printf_argument("%%", &a));
  EXPECT_FALSE(parse_printf_argument("%(name)s", &a));
}

TEST(Placeholders, ReportCountsAgainstSourceAndReference) {
  const std::vector<std::string> src = {"%1$s 的 %2$d", "没有", "<b>%s</b>"};
  const std::vector<std::string> ref = {"%s of %d", "none", "<b>%s</b>"};
  const std::vector<std::string> hyp = {"%s of %d", "none", "<b>%s"};
  const PlaceholderReport r = placeholder_report(src, hyp, ref);
  EXPECT_EQ(r.lines, 2);
  EXPECT_EQ(r.source_total, 5);
  EXPECT_EQ(r.source_kept, 2);  // %1$s/%2$d are not verbatim in the output; <b> and %s are
  EXPECT_EQ(r.reference_total, 5);
  EXPECT_EQ(r.reference_matched, 4);  // </b> lost
  EXPECT_EQ(r.lines_with_reference, 2);
  EXPECT_EQ(r.lines_exact, 1);
  EXPECT_NE(format_placeholders(r).find("80.0% of the reference's"), std::string::npos);
  ASSERT_EQ(r.by_kind.size(), 2u);
  EXPECT_EQ(r.by_kind.at("printf").total, 3);    // %s %d, %s
  EXPECT_EQ(r.by_kind.at("printf").matched, 3);
  EXPECT_EQ(r.by_kind.at("markup").total, 2);    // <b> </b>
  EXPECT_EQ(r.by_kind.at("markup").matched, 1);
  EXPECT_NE(format_placeholders(r).find("by kind (kept of the reference's): markup 50.0% of 2, printf 100.0% of 3"),
            std::string::npos) << format_placeholders(r);
  EXPECT_STREQ(placeholder_kind("%(n)d"), "python");
  EXPECT_STREQ(placeholder_kind("{0}"), "brace");
  EXPECT_STREQ(placeholder_kind("&amp;"), "entity");
  EXPECT_STREQ(placeholder_kind("--force"), "option");
  EXPECT_THROW(placeholder_report(src, hyp, {"x"}), std::invalid_argument);
}

TEST(Placeholders, FindsPythonNamesAndCharacterReferences) {
  using V = std::vector<std::string>;
  EXPECT_EQ(find_placeholders("%(count)d of %(name)s, %(x)r; %(bad"), (V{"%(count)d", "%(name)s", "%(x)r"}));
  EXPECT_EQ(find_placeholders("Tom &amp; Jerry &#39;x&#x27; & y &nosemicolon"), (V{"&amp;", "&#39;", "&#x27;"}));
  const auto spans = find_placeholder_spans("a %s b");
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].offset, 2u);
  EXPECT_EQ(spans[0].length, 2u);
}

using data::mask_source;
using data::mask_target;
using data::restore_target;
using data::sentinel;

TEST(PlaceholderMask, PrintfArgumentsKeepTheirNumbersAcrossLanguages) {
  // Chinese with positions, English in turn: the same arguments, the same sentinels.
  const data::MaskedSource m = mask_source("%2$s 的 %1$lu");
  EXPECT_EQ(m.text, sentinel(2) + " 的 " + sentinel(1));
  ASSERT_EQ(m.slots.size(), 2u);
  EXPECT_EQ(m.slots[0].text, "%1$lu");
  EXPECT_EQ(m.slots[0].conversion, "%lu");
  EXPECT_EQ(mask_target("%lu of %s", m), sentinel(1) + " of " + sentinel(2));
  // Back in argument order: no positions; in another order: positions.
  EXPECT_EQ(restore_target(sentinel(1) + " of " + sentinel(2), m), "%lu of %s");
  EXPECT_EQ(restore_target(sentinel(2) + " of " + sentinel(1), m), "%2$s of %1$lu");
}

TEST(PlaceholderMask, OtherPlaceholdersStandForTheirText) {
  // Printf arguments first (1), then the others in order of appearance.
  const data::MaskedSource m = mask_source("<b>%s</b> 和 {0}，使用 --force &amp; %%");
  const auto S = [](int k) { return sentinel(k); };
  EXPECT_EQ(m.text, S(2) + S(1) + S(3) + " 和 " + S(4) + "，使用 " + S(5) + " " + S(6) + " " + S(7));
  const std::string en = "<b>%s</b> and {0}, use --force &amp; %%";
  const std::string masked = mask_target(en, m);
  EXPECT_EQ(masked, S(2) + S(1) + S(3) + " and " + S(4) + ", use " + S(5) + " " + S(6) + " " + S(7));
  EXPECT_EQ(restore_target(masked, m), en);
  // What the source lacks stays verbatim in a target, and is dropped from a translation.
  EXPECT_EQ(mask_target("<i>{1}</i> %s %d", m), "<i>{1}</i> " + S(1) + " %d");
  EXPECT_EQ(restore_target(S(9) + "x" + S(data::kMaxSentinels) + S(4), m), "x {0}");  // a space after a word
}

// Decoding forces a missing placeholder in at the end, where the model wrote
// no space for it: one that follows a word or another placeholder gets a
// space, unless the source glues it so too; markup and entities touch text.
TEST(PlaceholderMask, APlaceholderAfterAWordGetsASpaceUnlessTheSourceGluesIt) {
  const auto S = [](int k) { return sentinel(k); };
  const data::MaskedSource m = mask_source("文件 %s 现在不存在");
  EXPECT_FALSE(m.slots[0].glued);
  EXPECT_EQ(restore_target("the file does not exist now" + S(1), m), "the file does not exist now %s");
  EXPECT_EQ(restore_target("file " + S(1) + " is gone", m), "file %s is gone");
  EXPECT_EQ(restore_target("(" + S(1) + ")", m), "(%s)");  // not after a word
  const data::MaskedSource two = mask_source("%1$d 个 %2$s");
  EXPECT_EQ(restore_target("now" + S(2) + S(1), two), "now %2$s %1$d");
  // Glued in the source ("0x%08x", "%s%s"): left glued.
  const data::MaskedSource hex = mask_source("地址 0x%08x，%s%s");
  EXPECT_TRUE(hex.slots[0].glued);
  EXPECT_FALSE(hex.slots[1].glued);
  EXPECT_TRUE(hex.slots[2].glued);
  EXPECT_EQ(restore_target("address 0x" + S(1) + ", " + S(2) + S(3), hex), "address 0x%08x, %s%s");
  const data::MaskedSource markup = mask_source("<b>粗体</b> &amp; 100%%");
  EXPECT_EQ(restore_target(S(1) + "bold" + S(2) + S(3) + " 100" + S(4), markup), "<b>bold</b>&amp; 100%%");
}

// What a person is shown of a token (an attention map's labels): each
// sentinel as the source's own text for it, positions and all; one the
// source lacks as [#k]; nothing else changes.
TEST(PlaceholderMask, SentinelsAreShownAsTheSourcesPlaceholders) {
  const data::MaskedSource m = mask_source("%2$s 的 %1$lu，<b>");
  EXPECT_EQ(data::show_sentinels("\u2581" + sentinel(2), m), "\u2581%2$s");
  EXPECT_EQ(data::show_sentinels(sentinel(1) + " of " + sentinel(3), m), "%1$lu of <b>");
  EXPECT_EQ(data::show_sentinels(sentinel(7), m), "[#7]");
  EXPECT_EQ(data::show_sentinels("\u2581files", m), "\u2581files");
}

TEST(PlaceholderMask, ALineWithMorePlaceholdersThanSentinelsKeepsTheRest) {
  std::string zh, expect;
  for (int i = 0; i < data::kMaxSentinels + 6; ++i) {
    const std::string p = "{a" + std::to_string(i) + "}";
    zh += p + " ";
    expect += (i < data::kMaxSentinels ? sentinel(i + 1) : p) + " ";
  }
  const data::MaskedSource m = mask_source(zh);
  EXPECT_EQ(m.text, expect);
  EXPECT_EQ(restore_target(m.text, m), zh);
  EXPECT_EQ(mask_source("no placeholders").text, "no placeholders");
}

// On the real corpus: masking a reference and restoring it gives it back,
// except where arguments are numbered ("%2$s") in a way the restored order
// cannot say (binutils' "%X%C ... %3$s ... %1$s" mixes both kinds).
TEST(PlaceholderMask, MaskingAndRestoringTheRealReferencesIsLossless) {
  const auto zh = read_lines(std::string(NMT_SOURCE_DIR) + "/data/real/test.zh");
  const auto en = read_lines(std::string(NMT_SOURCE_DIR) + "/data/real/test.en");
  ASSERT_EQ(zh.size(), en.size());
  int masked_lines = 0, lossy = 0;
  for (size_t i = 0; i < zh.size(); ++i) {
    const data::MaskedSource m = mask_source(zh[i]);
    const std::string target = mask_target(en[i], m);
    masked_lines += target != en[i];
    if (restore_target(target, m) != en[i]) {
      ++lossy;
      EXPECT_TRUE(en[i].find('$') != std::string::npos || zh[i].find('$') != std::string::npos)
          << "line " << i + 1 << ": " << en[i];
    }
  }
  EXPECT_GT(masked_lines, 600);  // ~700 of the 2,000 references carry placeholders
  EXPECT_LE(lossy, 3);
}

}  // namespace
}  // namespace nmt::eval
