// Reading text inputs (corpora, translate input, references): UTF-8 checked
// line by line, "\r\n" and a leading byte order mark accepted. Plain C++17
// (no LibTorch): the parser is fuzzed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

// What makes a line unusable as text ("not valid UTF-8 (byte B)", "contains
// a NUL byte (byte B)"), or "" when it is fine.
std::string line_problem(std::string_view line);

// The lines of `content` (without "\n", "\r\n", or a first-line BOM).
// InputError "SOURCE:LINE: not valid UTF-8 (byte B)" on the first bad line.
std::vector<std::string> split_lines(std::string_view content, const std::string& source);

// The lines of a file; InputError naming it when it cannot be read.
std::vector<std::string> read_lines(const std::string& path);

// Both sides of a parallel corpus, line i of one translating line i of the
// other: InputError naming the file unless both exist, are valid UTF-8, have
// equally many lines, and at least one.
struct ParallelText {
  std::vector<std::string> src, tgt;
};
ParallelText read_parallel_text(const std::string& src_path, const std::string& tgt_path);

// Reads lines incrementally (translate streams its input): UTF-8 checked,
// "\r\n" and a leading byte order mark accepted, like split_lines.
class LineReader {
 public:
  // A file; "" or "-" is standard input. InputError when it cannot be opened.
  explicit LineReader(const std::string& path);
  // An open stream (kept by reference), named `source` in messages.
  LineReader(std::istream& in, std::string source);
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Up to n more lines (fewer at the end). `translated_before` lines were
  // handed out before; the message of a bad line says so, and whether they
  // went to stdout (`output` empty) or were kept from `output`.
  std::vector<std::string> next(size_t n, int64_t translated_before, const std::string& output);

 private:
  std::string source_;
  std::ifstream file_;
  std::istream* in_ = nullptr;
  int64_t number_ = 0;
};

struct ParallelTextCheck {
  int64_t lines = 0;        // on each side
  int64_t empty_pairs = 0;  // pairs with an empty side (dropped for training)
};

// A parallel corpus fit to train on, checked before any tokenizer is
// trained: both files readable UTF-8, equally many lines, and at least one
// pair with text on both sides. InputError naming the file otherwise.
ParallelTextCheck check_parallel_text(const std::string& src_path, const std::string& tgt_path);

}  // namespace nmt
