// Reading text inputs (corpora, translate input, references): UTF-8 checked
// line by line, "\r\n" and a leading byte order mark accepted. Plain C++17
// (no LibTorch): the parser is fuzzed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

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

struct ParallelTextCheck {
  int64_t lines = 0;        // on each side
  int64_t empty_pairs = 0;  // pairs with an empty side (dropped for training)
};

// A parallel corpus fit to train on, checked before any tokenizer is
// trained: both files readable UTF-8, equally many lines, and at least one
// pair with text on both sides. InputError naming the file otherwise.
ParallelTextCheck check_parallel_text(const std::string& src_path, const std::string& tgt_path);

}  // namespace nmt
