#include "data/text_io.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/utf8.h"

namespace nmt {

// A NUL byte is valid UTF-8 but would cut the line short where it is handed
// on as a C string (the tokenizer), so it is refused here, naming its place.
std::string line_problem(std::string_view line) {
  const size_t bad = utf8::first_invalid(line);
  const size_t nul = line.find('\0');
  if (bad == std::string_view::npos && nul == std::string_view::npos) return "";
  if (nul < bad) return "contains a NUL byte (byte " + std::to_string(nul + 1) + ")";
  return "not valid UTF-8 (byte " + std::to_string(bad + 1) + ")";
}

std::vector<std::string> split_lines(std::string_view content, const std::string& source) {
  content = utf8::strip_bom(content);
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    const bool last = end == std::string_view::npos;
    if (last) end = content.size();
    std::string_view line = content.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string problem = line_problem(line);
    if (!problem.empty()) throw InputError(source + ":" + std::to_string(lines.size() + 1) + ": " + problem);
    lines.emplace_back(line);
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> read_lines(const std::string& path) {
  return split_lines(read_file(path), path);
}

ParallelText read_parallel_text(const std::string& src_path, const std::string& tgt_path) {
  ParallelText text{read_lines(src_path), read_lines(tgt_path)};
  if (text.src.size() != text.tgt.size())
    throw InputError(tgt_path + ": has " + std::to_string(text.tgt.size()) + " lines but " + src_path +
                     " has " + std::to_string(text.src.size()));
  if (text.src.empty()) throw InputError(src_path + ": no sentences (empty file)");
  return text;
}

LineReader::LineReader(const std::string& path)
    : source_(path.empty() || path == "-" ? "<stdin>" : path) {
  if (source_ != "<stdin>") {
    file_.open(path, std::ios::binary);
    if (!file_) throw InputError(path + ": cannot open file: " + std::strerror(errno));
    in_ = &file_;
  } else {
    in_ = &std::cin;
  }
}

LineReader::LineReader(std::istream& in, std::string source) : source_(std::move(source)), in_(&in) {}

std::vector<std::string> LineReader::next(size_t n, int64_t translated_before, const std::string& output) {
  std::istream& in = *in_;
  std::vector<std::string> lines;
  std::string line;
  while (lines.size() < n && std::getline(in, line)) {
    if (number_ == 0 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) {
      line.erase(0, 3);
      // Only a BOM: no lines, as split_lines (and so nmt score) reads it.
      if (line.empty() && in.eof()) break;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ++number_;
    const std::string problem = line_problem(line);
    if (!problem.empty())
      throw InputError(source_ + ":" + std::to_string(number_) + ": " + problem + "; " + std::to_string(translated_before) +
                       " lines were translated before it" +
                       (output.empty() ? " (and written to stdout)" : " (" + output + " not written)"));
    lines.push_back(std::move(line));
  }
  if (in.bad()) throw InputError(source_ + ": cannot read: " + std::strerror(errno));
  return lines;
}

ParallelTextCheck check_parallel_text(const std::string& src_path, const std::string& tgt_path) {
  const auto [src, tgt] = read_parallel_text(src_path, tgt_path);
  ParallelTextCheck check;
  check.lines = static_cast<int64_t>(src.size());
  for (size_t i = 0; i < src.size(); ++i) check.empty_pairs += src[i].empty() || tgt[i].empty();
  if (check.empty_pairs == check.lines)
    throw InputError(src_path + ": no sentence pairs: each of the " + std::to_string(check.lines) +
                     " lines is empty on one side or the other (" + tgt_path + ")");
  return check;
}

}  // namespace nmt
