// Hand-written SVG: the attention heatmap.
#include "viz/svg.h"

#include "util/utf8.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace nmt::viz {
namespace {

// CJK fonts first: their Latin glyphs are fine, and one font for both scripts
// keeps the width estimates below honest. Browsers fall back per glyph.
constexpr const char* kFontFamily =
    "Noto Sans CJK SC, Source Han Sans SC, PingFang SC, Microsoft YaHei, sans-serif";
constexpr double kMargin = 16;
constexpr double kTitleFont = 16;
constexpr double kLabelFont = 13;
constexpr double kTickFont = 12;
constexpr double kValueFont = 10;
constexpr double kCell = 34;
constexpr double kColumnAngleDeg = 60;
constexpr double kMaxLabelEm = 14;  // heatmap labels wider than this are cut
constexpr double kChartWidth = 860;
constexpr double kChartHeight = 480;
constexpr size_t kMaxMarkers = 40;  // points per series up to which each point gets a dot
constexpr std::array<const char*, 8> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                 "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
// Viridis at 0, .25, .5, .75, 1: perceptually ordered and colour-blind safe.
constexpr std::array<std::array<int, 3>, 5> kViridis = {
    {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};
constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr double kPi = 3.14159265358979323846;

std::string printf_string(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* f, ...) {
  va_list ap;
  va_start(ap, f);
  char small[256];
  const int n = std::vsnprintf(small, sizeof small, f, ap);
  va_end(ap);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof small) return std::string(small, n);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, f);
  std::vsnprintf(out.data(), out.size(), f, ap);
  va_end(ap);
  out.resize(n);
  return out;
}

// Strict UTF-8 (no overlongs, surrogates or > U+10FFFF): an XML parser
// rejects the whole document on any of them.
int utf8_next(const std::string& s, size_t i, char32_t* cp) { return utf8::next(s, i, cp); }

bool is_wide(char32_t c) {
  return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) ||
         (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
         (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x20000 && c <= 0x3FFFD);
}

// Rough rendered width in em: SVG has no text measurement, and layout only
// needs to keep labels from overlapping or being clipped, so estimates err wide.
double char_em(char32_t cp) {
  if (cp >= 0x80) return is_wide(cp) ? 1.0 : 0.62;
  const char c = static_cast<char>(cp);
  if (std::strchr("ijlI.,:;'|!` ", c) != nullptr) return 0.32;
  if ((c >= 'A' && c <= 'Z') || c == 'm' || c == 'w') return 0.72;
  return 0.58;
}

double text_width(const std::string& s, double font) {
  double em = 0;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0xFFFD;
    const int n = utf8_next(s, i, &cp);
    i += n > 0 ? n : 1;
    em += char_em(cp);
  }
  return em * font;
}

// Cut to about kMaxLabelEm wide (SentencePiece can emit long pieces), ending in "…".
std::string truncate_label(const std::string& s) {
  double em = 0;
  size_t cut = 0;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0xFFFD;
    const int n = utf8_next(s, i, &cp);
    em += char_em(cp);
    if (em <= kMaxLabelEm - 1) cut = i + (n > 0 ? n : 1);  // room left for the ellipsis
    if (em > kMaxLabelEm) return s.substr(0, cut) + "\xE2\x80\xA6";
    i += n > 0 ? n : 1;
  }
  return s;
}

std::string colour(double t) {
  if (!std::isfinite(t)) return "#bdbdbd";
  t = std::clamp(t, 0.0, 1.0) * (kViridis.size() - 1);
  const size_t k = std::min(static_cast<size_t>(t), kViridis.size() - 2);
  const double f = t - static_cast<double>(k);
  std::array<int, 3> rgb;
  for (int j = 0; j < 3; ++j)
    rgb[j] = static_cast<int>(std::lround(kViridis[k][j] + f * (kViridis[k + 1][j] - kViridis[k][j])));
  return printf_string("#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

std::string svg_open(double w, double h, const std::string& title) {
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += printf_string("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
           "viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\" font-size=\"%.0f\">\n",
           w, h, w, h, kFontFamily, kLabelFont);
  if (!title.empty()) s += "<title>" + xml_escape(title) + "</title>\n";
  s += "<rect class=\"bg\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  if (!title.empty())
    s += printf_string("<text class=\"title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%.0f\" "
             "font-weight=\"bold\">",
             w / 2, kMargin + kTitleFont, kTitleFont) +
         xml_escape(title) + "</text>\n";
  return s;
}

// ------------------------------------------------------------------ line chart

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t cp;
    const int n = utf8_next(text, i, &cp);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    switch (cp) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE || cp == 0xFFFF) {
          out += kReplacement;
        } else {
          out.append(text, i, n);
        }
    }
    i += n;
  }
  return out;
}

std::string heatmap_svg(const std::vector<std::vector<double>>& weights,
                        const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& col_labels, const std::string& title,
                        bool print_values) {
  const size_t rows = weights.size(), cols = col_labels.size();
  if (row_labels.size() != rows)
    throw std::invalid_argument(printf_string("heatmap_svg: %zu rows of weights but %zu row labels", rows,
                                    row_labels.size()));
  for (size_t r = 0; r < rows; ++r)
    if (weights[r].size() != cols)
      throw std::invalid_argument(printf_string("heatmap_svg: row %zu has %zu weights but there are %zu "
                                      "column labels",
                                      r, weights[r].size(), cols));

  std::vector<std::string> rl, cl;
  for (const auto& l : row_labels) rl.push_back(truncate_label(l));
  for (const auto& l : col_labels) cl.push_back(truncate_label(l));

  const double sin_a = std::sin(kColumnAngleDeg * kPi / 180);
  const double cos_a = std::cos(kColumnAngleDeg * kPi / 180);
  double row_w = 0;
  for (const auto& l : rl) row_w = std::max(row_w, text_width(l, kLabelFont));
  // Column labels run up and to the right from their column: they need
  // height above the grid and may reach past its right edge.
  double col_h = 0, col_right = 0;
  for (size_t c = 0; c < cols; ++c) {
    const double w = text_width(cl[c], kLabelFont);
    col_h = std::max(col_h, w * sin_a + kLabelFont * cos_a);
    col_right = std::max(col_right, (c + 0.5) * kCell + w * cos_a + kLabelFont * sin_a);
  }
  const double title_h = title.empty() ? 0 : kTitleFont + 14;
  const double x0 = kMargin + row_w + 8;
  const double y0 = kMargin + title_h + col_h + 10;
  const double grid_w = cols * kCell, grid_h = rows * kCell;
  const double bar_x = x0 + grid_w + 24, bar_w = 14;
  const double bar_h = std::clamp(grid_h, 100.0, 300.0);
  const double width =
      std::ceil(std::max({bar_x + bar_w + 6 + text_width("0.75", kTickFont) + kMargin,
                          x0 + col_right + kMargin,
                          2 * kMargin + 1.1 * text_width(title, kTitleFont)}));
  const double height = std::ceil(y0 + std::max(grid_h, bar_h + kTickFont / 2) + kMargin);

  std::string s = svg_open(width, height, title);
  s += "<defs><linearGradient id=\"nmt-heat-scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (size_t k = 0; k < kViridis.size(); ++k) {
    const double t = static_cast<double>(k) / (kViridis.size() - 1);
    s += printf_string("<stop offset=\"%.2f\" stop-color=\"%s\"/>", t, colour(t).c_str());
  }
  s += "</linearGradient></defs>\n";

  s += "<g class=\"row-labels\" text-anchor=\"end\">\n";
  for (size_t r = 0; r < rows; ++r)
    s += printf_string("<text x=\"%.1f\" y=\"%.1f\">", x0 - 6, y0 + (r + 0.5) * kCell + 0.35 * kLabelFont) +
         xml_escape(rl[r]) + "</text>\n";
  s += "</g>\n<g class=\"col-labels\" text-anchor=\"start\">\n";
  for (size_t c = 0; c < cols; ++c) {
    // Shifted by 0.35 em across the text so the rotated glyphs centre on the column.
    const double ax = x0 + (c + 0.5) * kCell + 0.35 * kLabelFont * sin_a;
    const double ay = y0 - 6 + 0.35 * kLabelFont * cos_a;
    s += printf_string("<text transform=\"translate(%.1f %.1f) rotate(-%.0f)\">", ax, ay, kColumnAngleDeg) +
         xml_escape(cl[c]) + "</text>\n";
  }
  s += "</g>\n<g class=\"cells\" stroke=\"#ffffff\" stroke-width=\"1\">\n";
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const double v = weights[r][c];
      s += printf_string("<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" "
               "fill=\"%s\"><title>",
               x0 + c * kCell, y0 + r * kCell, kCell, kCell, colour(v).c_str()) +
           xml_escape(row_labels[r]) + " / " + xml_escape(col_labels[c]) +
           (std::isfinite(v) ? printf_string(": %.3f", v) : std::string(": n/a")) + "</title></rect>\n";
    }
  }
  s += "</g>\n";
  if (print_values) {
    s += printf_string("<g class=\"values\" text-anchor=\"middle\" font-size=\"%.0f\">\n", kValueFont);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) {
        const double v = weights[r][c];
        if (!std::isfinite(v)) continue;
        // Viridis gets lighter with the value: dark text from about the middle up.
        s += printf_string("<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%.2f</text>\n", x0 + (c + 0.5) * kCell,
                 y0 + (r + 0.5) * kCell + 0.35 * kValueFont, v < 0.55 ? "#ffffff" : "#000000", v);
      }
    }
    s += "</g>\n";
  }

  s += printf_string("<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" "
           "fill=\"url(#nmt-heat-scale)\" stroke=\"#888888\" stroke-width=\"0.5\"/>\n",
           bar_x, y0, bar_w, bar_h);
  s += printf_string("<g class=\"legend-ticks\" font-size=\"%.0f\">\n", kTickFont);
  for (const double t : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const double y = y0 + bar_h * (1 - t);
    s += printf_string("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555555\"/>"
             "<text x=\"%.1f\" y=\"%.1f\">%g</text>\n",
             bar_x + bar_w, y, bar_x + bar_w + 4, y, bar_x + bar_w + 6, y + 0.35 * kTickFont, t);
  }
  s += "</g>\n</svg>\n";
  return s;
}

}  // namespace nmt::viz
