// The corpus reader: bytes -> lines (split_lines: BOM, CRLF, UTF-8 check) ->
// SentencePiece ids with both the source and the target model, as training
// data goes. Expected failures are InputError; any other exception escapes
// and counts as a crash. Properties: split_lines agrees with a plain
// reference split (it fails exactly when a line is not UTF-8 or holds a NUL
// byte, which the tokenizer's C-string interface would cut the line at), and
// every id is a piece of its model.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/text_io.h"
#include "fuzz_util.h"
#include "util/errors.h"
#include "util/utf8.h"

namespace {

// The lines as documented: a leading BOM dropped, a final "\n" ends the last
// line (no empty line after it), one "\r" before each line end dropped.
std::vector<std::string> reference_lines(std::string_view s) {
  s = nmt::utf8::strip_bom(s);
  std::vector<std::string> lines;
  if (s.empty()) return lines;
  if (s.back() == '\n') s.remove_suffix(1);
  std::string line;
  for (char c : s) {
    if (c == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  lines.push_back(line);
  for (auto& l : lines)
    if (!l.empty() && l.back() == '\r') l.pop_back();
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nmt;
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> expected = reference_lines(content);
  bool all_valid = true;
  for (const auto& l : expected) all_valid = all_valid && utf8::valid(l) && l.find('\0') == std::string::npos;
  std::vector<std::string> lines;
  try {
    lines = split_lines(content, "corpus.txt");
  } catch (const InputError&) {
    fuzz::check(!all_valid, "split_lines rejected lines that are all UTF-8 text without NUL");
    return 0;
  }
  fuzz::check(all_valid, "split_lines accepted a line that is not UTF-8 or holds a NUL");
  fuzz::check(lines == expected, "split_lines disagrees with the reference split");
  for (const auto& line : lines) {
    fuzz::encode_checked(fuzz::src_tokenizer(), line);
    fuzz::encode_checked(fuzz::tgt_tokenizer(), line);
  }
  return 0;
}
