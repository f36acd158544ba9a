// SVG writers: well-formed XML, escaping, one shape per datum, and the
// Python plotter drawing exactly what the C++ one draws.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
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

// ------------------------------------------------------------------ line chart

std::vector<Series> training_series() {
  std::vector<Series> s(3);
  s[0].name = "train loss";
  s[1].name = "valid loss";
  s[2].name = "valid BLEU";
  s[2].right_axis = true;
  for (int step = 0; step <= 20000; step += 100) {
    s[0].x.push_back(step);
    s[0].y.push_back(6.0 * std::exp(-step / 4000.0) + 1.5);
  }
  for (int step = 2000; step <= 20000; step += 2000) {
    s[1].x.push_back(step);
    s[1].y.push_back(5.5 * std::exp(-step / 4000.0) + 1.8);
    s[2].x.push_back(step);
    s[2].y.push_back(35.0 * (1 - std::exp(-step / 5000.0)));
  }
  return s;
}

TEST(LineChart, TwoAxesLegendAndOnePolylinePerSeries) {
  const std::string svg = line_chart_svg(training_series(), "zh→en <run>", "step", "loss", "BLEU");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<polyline"), 3u);
  EXPECT_EQ(count(svg, "<g class=\"series\""), 3u);
  EXPECT_NE(svg.find(">valid BLEU (right axis)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">train loss</text>"), std::string::npos);
  EXPECT_NE(svg.find("rotate(-90)\" text-anchor=\"middle\">loss</text>"), std::string::npos);
  EXPECT_NE(svg.find("rotate(90)\" text-anchor=\"middle\">BLEU</text>"), std::string::npos);
  EXPECT_NE(svg.find("zh→en &lt;run&gt;"), std::string::npos);
  // Step ticks in thousands; loss and BLEU ticks on their own scales.
  EXPECT_NE(svg.find(">0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">10k</text>"), std::string::npos);
  EXPECT_NE(svg.find(">20k</text>"), std::string::npos);
  EXPECT_NE(svg.find(">35</text>"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(LineChart, SinglePointShowsAMarker) {
  Series one{"valid BLEU", {500}, {12.5}, true};
  const std::string svg = line_chart_svg({one}, "one", "step", "", "BLEU");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  // One in the plot, one in the legend.
  EXPECT_EQ(count(svg, "<circle"), 2u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("(right axis)"), std::string::npos);  // nothing on the left to tell apart
}

TEST(LineChart, NonFinitePointsBreakTheLine) {
  Series s{"loss", {1, 2, 3, 4, 5}, {2.0, 1.5, std::nan(""), 1.2, INFINITY}, false};
  const std::string svg = line_chart_svg({s}, "", "step", "loss", "");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(LineChart, NoDataAndHugeSeries) {
  const std::string none = line_chart_svg({}, "", "", "", "");
  EXPECT_EQ(xml_problem(none), "");
  EXPECT_NE(none.find(">no data</text>"), std::string::npos);
  EXPECT_EQ(xml_problem(line_chart_svg({Series{"empty", {}, {}, false}}, "t", "x", "y", "")), "");

  Series big{"train loss", {}, {}, false};
  for (int i = 0; i < 200000; ++i) {
    big.x.push_back(i);
    big.y.push_back(std::sin(i * 0.01) + 0.001 * (i % 7));
  }
  const std::string svg = line_chart_svg({big}, "big", "step", "loss", "");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  EXPECT_LT(svg.size(), 100000u) << "points should be thinned to the plot's pixel columns";
}

// ------------------------------------------------------------------ files

std::filesystem::path fresh_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() /
                 ("nmt_svg_test_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(WriteFileAtomic, WritesReplacesAndNamesTheFileOnFailure) {
  const auto dir = fresh_dir("atomic");
  const std::string path = (dir / "fig.svg").string();
  write_file_atomic(path, "first");
  write_file_atomic(path, "second, longer");
  EXPECT_EQ(slurp(path), "second, longer");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  const std::string bad = (dir / "missing" / "fig.svg").string();
  try {
    write_file_atomic(bad, "x");
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// ------------------------------------------------------------------ scripts/plot_metrics.py

int run_status(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(PlotMetricsScript, DrawsWhatLineChartSvgDraws) {
  if (run_status("/usr/bin/python3 -c 'import json' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 not available";
  const auto dir = fresh_dir("plot");
  const std::vector<Series> s = training_series();
  {
    std::ofstream f(dir / "metrics.jsonl");
    char buf[512];
    // Training lines carry only train_loss, validation lines the rest, as the
    // trainer writes them; a line without "step" is ignored.
    for (size_t i = 0; i < s[0].x.size(); ++i) {
      std::snprintf(buf, sizeof buf, "{\"step\": %.17g, \"epoch\": 1, \"train_loss\": %.17g, \"lr\": 0.0007}\n",
                    s[0].x[i], s[0].y[i]);
      f << buf;
      for (size_t k = 0; k < s[1].x.size(); ++k) {
        if (s[1].x[k] != s[0].x[i]) continue;
        std::snprintf(buf, sizeof buf, "{\"step\": %.17g, \"valid_loss\": %.17g, \"valid_bleu\": %.17g}\n",
                      s[1].x[k], s[1].y[k], s[2].y[k]);
        f << buf;
      }
    }
    f << "{\"event\": \"finished\"}\n";
  }
  const std::string script = std::string(NMT_SOURCE_DIR) + "/scripts/plot_metrics.py";
  const auto out = dir / "curves.svg";
  ASSERT_EQ(run_status("/usr/bin/python3 '" + script + "' '" + (dir / "metrics.jsonl").string() + "' '" +
                       out.string() + "'"),
            0);
  const std::string py = slurp(out);
  EXPECT_EQ(xml_problem(py), "");
  const std::string title = "training curves: " + dir.filename().string();
  EXPECT_EQ(py, line_chart_svg(s, title, "step", "loss", "BLEU"));

  // Bad input: exit 2, one line naming file and line.
  {
    std::ofstream f(dir / "bad.jsonl");
    f << "{\"step\": 1, \"train_loss\": 2.0}\n{\"step\": 2, \"train_loss\": \n";
  }
  const auto err = dir / "err.txt";
  EXPECT_EQ(run_status("/usr/bin/python3 '" + script + "' '" + (dir / "bad.jsonl").string() + "' '" +
                       (dir / "x.svg").string() + "' 2>'" + err.string() + "'"),
            2);
  const std::string msg = slurp(err);
  EXPECT_NE(msg.find("bad.jsonl:2:"), std::string::npos) << msg;
  EXPECT_EQ(count(msg, "\n"), 1u) << msg;
  EXPECT_EQ(run_status("/usr/bin/python3 '" + script + "' '" + (dir / "none.jsonl").string() + "' '" +
                       (dir / "x.svg").string() + "' 2>/dev/null"),
            2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nmt::viz
