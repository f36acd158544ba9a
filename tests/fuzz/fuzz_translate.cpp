// The translate input path: bytes -> LineReader (what nmt translate reads
// its input with, in chunks) -> source-model ids. The first byte picks the
// chunk size (1..16 lines), the rest is the input. Expected failures are
// InputError; any other exception escapes and counts as a crash. Properties:
// the chunks together are exactly the lines split_lines reads from the same
// bytes, a bad line fails both at the same line number, and every id is a
// piece of the model.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "data/text_io.h"
#include "fuzz_util.h"
#include "util/errors.h"

namespace {

// "SOURCE:LINE: ..." -> LINE (both readers put it there).
std::string line_of(const std::string& message, const std::string& source) {
  const size_t from = source.size() + 1;
  return message.substr(from, message.find(':', from) - from);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nmt;
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 16;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::string split_error;
  std::vector<std::string> split;
  try {
    split = split_lines(text, "input.txt");
  } catch (const InputError& e) {
    split_error = e.what();
  }

  std::istringstream in(text);
  LineReader reader(in, "input.txt");
  std::vector<std::string> read;
  int64_t translated = 0;
  try {
    for (;;) {
      const std::vector<std::string> lines = reader.next(chunk, translated, "");
      fuzz::check(lines.size() <= chunk, "LineReader returned more lines than asked for");
      if (lines.empty()) break;
      for (const auto& line : lines) fuzz::encode_checked(fuzz::src_tokenizer(), line);
      read.insert(read.end(), lines.begin(), lines.end());
      translated += static_cast<int64_t>(lines.size());
    }
  } catch (const InputError& e) {
    fuzz::check(!split_error.empty(), std::string("LineReader rejected what split_lines read: ") + e.what());
    fuzz::check(line_of(e.what(), "input.txt") == line_of(split_error, "input.txt"),
                "LineReader and split_lines fail at different lines: " + std::string(e.what()) + " / " +
                    split_error);
    return 0;
  }
  fuzz::check(split_error.empty(), "LineReader accepted what split_lines rejected: " + split_error);
  fuzz::check(read == split, "LineReader and split_lines read different lines");
  return 0;
}
