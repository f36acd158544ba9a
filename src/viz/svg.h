// Self-contained SVG attention heatmaps that any browser shows, with no
// plotting library. Plain C++17: no LibTorch. (Training curves are drawn by
// scripts/plot_metrics.py from metrics.jsonl.)
#pragma once

#include <string>
#include <vector>

namespace nmt::viz {

// Rows = generated target tokens, columns = source tokens; weights[r][c] in
// [0, 1] (clamped; non-finite cells are drawn grey). Labels are UTF-8; a font
// list with CJK fallbacks lets Chinese render. Each cell carries a tooltip and,
// when print_values, its value. std::invalid_argument when the shape and the
// label counts disagree.
std::string heatmap_svg(const std::vector<std::vector<double>>& weights,
                        const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& col_labels, const std::string& title,
                        bool print_values = true);

// Text safe inside XML content and attribute values: &<>"' escaped, bytes
// that are not valid UTF-8 or not allowed in XML 1.0 replaced by U+FFFD
// (a single such byte would make a browser refuse the whole file).
std::string xml_escape(const std::string& text);

}  // namespace nmt::viz
