// SVG writers (viz/svg.h): well-formed XML, escaping, one shape per datum.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "viz/svg.h"

namespace nmt::viz {
namespace {

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (int k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

// A small XML well-formedness check: declaration and comments skipped,
// every element closed in order, one <svg> root, attribute values quoted,
// every '&' an entity, no '<' in attribute values or stray text. Returns
// "" when well-formed, else what is wrong and where.
std::string xml_problem(const std::string& doc) {
  if (!valid_utf8(doc)) return "not UTF-8";
  if (doc.rfind("<?xml", 0) != 0) return "no XML declaration";
  const auto is_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || std::strchr(":_-.", c); };
  const auto entity_len = [&](size_t amp) -> size_t {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      if (doc.compare(amp, std::strlen(e), e) == 0) return std::strlen(e);
    return 0;
  };
  std::vector<std::string> open;
  int roots = 0;
  std::string root;
  size_t i = 0;
  const auto where = [&](size_t at) { return " at byte " + std::to_string(at); };
  while (i < doc.size()) {
    if (doc[i] != '<') {
      if (doc[i] == '&' && entity_len(i) == 0) return "bare '&'" + where(i);
      if (open.empty() && !std::isspace(static_cast<unsigned char>(doc[i]))) return "text outside the root" + where(i);
      ++i;
      continue;
    }
    if (doc.compare(i, 2, "<?") == 0 || doc.compare(i, 4, "<!--") == 0) {
      const bool pi = doc[i + 1] == '?';
      const size_t end = doc.find(pi ? "?>" : "-->", i);
      if (end == std::string::npos) return "unterminated declaration or comment" + where(i);
      i = end + (pi ? 2 : 3);
      continue;
    }
    const bool closing = doc[i + 1] == '/';
    size_t j = i + 1 + (closing ? 1 : 0);
    const size_t name_start = j;
    while (j < doc.size() && is_name(doc[j])) ++j;
    const std::string name = doc.substr(name_start, j - name_start);
    if (name.empty()) return "tag without a name" + where(i);
    if (closing) {
      if (j >= doc.size() || doc[j] != '>') return "malformed end tag </" + name + where(i);
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes <" + (open.empty() ? "" : open.back()) + ">" + where(i);
      open.pop_back();
      i = j + 1;
      continue;
    }
    for (;;) {
      while (j < doc.size() && std::isspace(static_cast<unsigned char>(doc[j]))) ++j;
      if (j >= doc.size()) return "unterminated <" + name + where(i);
      const bool self_closing = doc.compare(j, 2, "/>") == 0;
      if (self_closing || doc[j] == '>') {
        if (open.empty() && ++roots == 1) root = name;
        if (!self_closing) open.push_back(name);
        i = j + (self_closing ? 2 : 1);
        break;
      }
      const size_t attr_start = j;
      while (j < doc.size() && is_name(doc[j])) ++j;
      if (j == attr_start || j + 1 >= doc.size() || doc[j] != '=' || doc[j + 1] != '"')
        return "malformed attribute in <" + name + where(j);
      const size_t end = doc.find('"', j + 2);
      if (end == std::string::npos) return "unterminated attribute value" + where(j);
      for (size_t k = j + 2; k < end; ++k) {
        if (doc[k] == '<') return "'<' in attribute value" + where(k);
        if (doc[k] == '&' && entity_len(k) == 0) return "bare '&' in attribute value" + where(k);
      }
      j = end + 1;
    }
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  if (roots != 1 || root != "svg") return "expected one <svg> root, got " + std::to_string(roots);
  return "";
}

TEST(XmlCheck, CatchesMalformedDocuments) {
  const std::string ok = "<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><rect/></g></svg>\n";
  EXPECT_EQ(xml_problem(ok), "");
  EXPECT_NE(xml_problem("<?xml?><svg><g></svg>"), "");
  EXPECT_NE(xml_problem("<?xml?><svg><text>a < b</text></svg>"), "");
  EXPECT_NE(xml_problem("<?xml?><svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<?xml?><svg a=\"<\"></svg>"), "");
  EXPECT_NE(xml_problem("<?xml?><svg></svg><svg></svg>"), "");
  EXPECT_NE(xml_problem("<?xml?><svg>\xff</svg>"), "");
}

// ------------------------------------------------------------------ heatmap

const std::vector<std::vector<double>> kWeights = {
    {0.7, 0.2, 0.05, 0.05}, {0.1, 0.6, 0.25, 0.05}, {0.0, 0.1, 0.3, 0.6}};

TEST(Heatmap, WellFormedWithOneRectPerCellAndEscapedLabels) {
  const std::vector<std::string> rows = {"I", "<&>", "say \"hi\" 'x'"};
  const std::vector<std::string> cols = {"我", "注意力", "a&b", "</s>"};
  const std::string svg = heatmap_svg(kWeights, rows, cols, "cross-attention <layer 1>");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<rect class=\"cell\""), 12u);
  EXPECT_NE(svg.find("encoding=\"UTF-8\""), std::string::npos);
  EXPECT_NE(svg.find("Noto Sans CJK SC"), std::string::npos);
  // Chinese verbatim, specials escaped, never raw.
  EXPECT_NE(svg.find(">我</text>"), std::string::npos);
  EXPECT_NE(svg.find(">注意力</text>"), std::string::npos);
  EXPECT_NE(svg.find(">&lt;&amp;&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">say &quot;hi&quot; &apos;x&apos;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">a&amp;b</text>"), std::string::npos);
  EXPECT_NE(svg.find(">&lt;/s&gt;</text>"), std::string::npos);
  EXPECT_EQ(svg.find("<&>"), std::string::npos);
  EXPECT_NE(svg.find("cross-attention &lt;layer 1&gt;"), std::string::npos);
  // Values printed once per cell; the legend shows the scale.
  EXPECT_NE(svg.find(">0.70</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<g class=\"values\""), 1u);
  EXPECT_NE(svg.find("<rect class=\"legend\""), std::string::npos);
  EXPECT_NE(svg.find("<linearGradient"), std::string::npos);
}

TEST(Heatmap, ValuesAreOptionalAndOddCellsStillDraw) {
  std::vector<std::vector<double>> w = kWeights;
  w[0][0] = std::nan("");
  w[0][1] = 1.5;  // clamped for colour
  const std::string svg = heatmap_svg(w, {"a", "b", "c"}, {"w", "x", "y", "z"}, "", false);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<rect class=\"cell\""), 12u);
  EXPECT_EQ(svg.find("class=\"values\""), std::string::npos);
  EXPECT_EQ(svg.find("class=\"title\""), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_NE(svg.find("fill=\"#fde725\""), std::string::npos);  // top of the scale
}

TEST(Heatmap, EmptyAndLongLabels) {
  EXPECT_EQ(xml_problem(heatmap_svg({}, {}, {}, "empty")), "");
  const std::string long_label(200, 'x');
  const std::string svg = heatmap_svg({{0.5}}, {long_label}, {"中华人民共和国国务院办公厅关于印发的通知"}, "t");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find("\xE2\x80\xA6</text>"), std::string::npos);  // cut with an ellipsis
  EXPECT_EQ(svg.find(">" + long_label + "<"), std::string::npos);
  EXPECT_NE(svg.find(long_label), std::string::npos);  // the tooltip keeps it whole
}

TEST(Heatmap, ShapeMismatchThrows) {
  EXPECT_THROW(heatmap_svg(kWeights, {"a", "b"}, {"w", "x", "y", "z"}, ""), std::invalid_argument);
  EXPECT_THROW(heatmap_svg(kWeights, {"a", "b", "c"}, {"w", "x", "y"}, ""), std::invalid_argument);
}

TEST(XmlEscape, ReplacesWhatXmlCannotCarry) {
  EXPECT_EQ(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
  EXPECT_EQ(xml_escape("中文 ok\t\n"), "中文 ok\t\n");
  EXPECT_EQ(xml_escape("x\x01y"), "x\xEF\xBF\xBDy");
  EXPECT_EQ(xml_escape("bad\xff"), "bad\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("cut\xE4\xB8"), "cut\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  const std::string svg = heatmap_svg({{0.5}}, {"\xff\x01"}, {"ok"}, "\xc0\xaf");
  EXPECT_EQ(xml_problem(svg), "");
}

}  // namespace
}  // namespace nmt::viz
