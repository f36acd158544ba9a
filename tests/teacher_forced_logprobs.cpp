// The model's log-probability of each target token given the source and the
// target prefix (teacher forcing), for comparison with another runtime that
// loads the same weights (tests/ctranslate2_roundtrip.py against
// CTranslate2's score_batch). Built on the installed API alone
// (nmt::Translator::score_batch, linking nmt::runtime).
// Usage: teacher_forced_logprobs CHECKPOINT SOURCES TARGETS
// prints, per line pair, the log-probabilities of y1 .. yn <end>; a
// placeholder-protected model scores the pair masked, as it was trained.
#include <nmt/translator.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> read_lines(const char* path) {
  std::ifstream in(path);
  if (!in) throw nmt::InputError(std::string(path) + ": cannot open");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: teacher_forced_logprobs CHECKPOINT SOURCES TARGETS\n";
    return 2;
  }
  try {
    nmt::TranslatorOptions options;
    options.device = nmt::Device::kCpu;
    const nmt::Translator translator(argv[1], options);
    for (const auto& row : translator.score_batch(read_lines(argv[2]), read_lines(argv[3]))) {
      for (size_t k = 0; k < row.size(); ++k) std::printf(k ? " %.6f" : "%.6f", row[k]);
      std::printf("\n");
    }
  } catch (const nmt::InputError& e) {
    std::cerr << "teacher_forced_logprobs: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
