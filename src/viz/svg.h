// Self-contained SVG figures (attention heatmaps, training curves) that any
// browser shows, with no plotting library. Plain C++17: no LibTorch.
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

// One line per series over a shared x (e.g. step). Series with right_axis
// use the right y-axis (e.g. BLEU beside losses). Non-finite points are
// skipped and break the line; a lone point shows as a marker.
struct Series {
  std::string name;
  std::vector<double> x, y;
  bool right_axis = false;
};
std::string line_chart_svg(const std::vector<Series>& series, const std::string& title,
                           const std::string& x_label, const std::string& left_label,
                           const std::string& right_label);

// Text safe inside XML content and attribute values: &<>"' escaped, bytes
// that are not valid UTF-8 or not allowed in XML 1.0 replaced by U+FFFD
// (a single such byte would make a browser refuse the whole file).
std::string xml_escape(const std::string& text);

// Writes PATH.tmp, then renames it over PATH, so readers (a browser
// refreshing the figure during training) never see a half-written file.
// std::runtime_error naming the file on failure.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace nmt::viz
