// The model's log-probability of each target token given the source and the
// target prefix (teacher forcing), for comparison with another runtime that
// loads the same weights (tests/ctranslate2_roundtrip.py against
// CTranslate2's score_batch). Built on the inference library alone.
// Usage: teacher_forced_logprobs CHECKPOINT SOURCES TARGETS
// prints, per line pair, the log-probabilities of y1 .. yn <end> (decode/scorer.h);
// a placeholder-protected model scores the pair masked, as it was trained.
#include <cstdio>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "data/text_io.h"
#include "decode/scorer.h"
#include "util/errors.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: teacher_forced_logprobs CHECKPOINT SOURCES TARGETS\n";
    return nmt::kExitInput;
  }
  try {
    nmt::LoadedCheckpoint ck = nmt::load_checkpoint(argv[1], c10::kCPU);
    const auto sources = nmt::read_lines(argv[2]);
    const auto targets = nmt::read_lines(argv[3]);
    const auto logprobs =
        nmt::score_pairs(ck.model, *ck.src_tok, *ck.tgt_tok, sources, targets, c10::Device(c10::kCPU),
                         ck.cfg.tokenizer.protect_placeholders);
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
