// Placeholders (eval/placeholders.h): the tokens a translation must carry
// over verbatim (printf conversions, {braces}, markup tags, --options) and
// the report that counts them against the source and the reference.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "eval/placeholders.h"

namespace nmt::eval {
namespace {

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
  EXPECT_THROW(placeholder_report(src, hyp, {"x"}), std::invalid_argument);
}

}  // namespace
}  // namespace nmt::eval
