// The model's log-probability of each target token given the source and the
// target prefix (teacher forcing), for comparison with another runtime that
// loads the same weights (tests/ctranslate2_roundtrip.py against
// CTranslate2's score_batch). Built on the inference library alone
// (nmt::Translator::score_batch).
// Usage: teacher_forced_logprobs CHECKPOINT SOURCES TARGETS
// prints, per line pair, the log-probabilities of y1 .. yn <end> (decode/scorer.h);
// a placeholder-protected model scores the pair masked, as it was trained.
#include <cstdio>
#include <iostream>

#include "data/text_io.h"
#include "decode/translator.h"
#include "util/errors.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: teacher_forced_logprobs CHECKPOINT SOURCES TARGETS\n";
    return nmt::kExitInput;
  }
  try {
    nmt::TranslatorOptions options;
    options.device = nmt::DeviceKind::kCpu;
    const nmt::Translator translator(argv[1], options);
    const auto sources = nmt::read_lines(argv[2]);
    const auto targets = nmt::read_lines(argv[3]);
    const auto logprobs = translator.score_batch(sources, targets);
    for (const auto& row : logprobs) {
      for (size_t k = 0; k < row.size(); ++k) std::printf(k ? " %.6f" : "%.6f", row[k]);
      std::printf("\n");
    }
  } catch (const nmt::InputError& e) {
    std::cerr << "teacher_forced_logprobs: error: " << e.what() << "\n";
    return nmt::kExitInput;
  }
  return nmt::kExitOk;
}
