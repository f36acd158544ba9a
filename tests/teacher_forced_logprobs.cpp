// The model's log-probability of each target token given the source and the
// target prefix (teacher forcing), for comparison with another runtime that
// loads the same weights (tests/ctranslate2_roundtrip.py against
// CTranslate2's score_batch). Built on the inference library alone.
// Usage: teacher_forced_logprobs CHECKPOINT SOURCES TARGETS
// prints, per line pair, the log-probabilities of y1 .. yn <end>.
#include <ATen/ATen.h>

#include <cstdio>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "data/text_io.h"
#include "tokenizer/special_ids.h"
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
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < sources.size() && i < targets.size(); ++i) {
      const auto x = ck.src_tok->encode(sources[i]);
      const auto y = ck.tgt_tok->encode(targets[i]);
      std::vector<int64_t> tgt_in{nmt::kStartId};  // <start> y1 .. yn -> y1 .. yn <end>
      tgt_in.insert(tgt_in.end(), y.begin(), y.end());
      std::vector<int64_t> labels(y.begin(), y.end());
      labels.push_back(nmt::kEndId);
      const int64_t s = static_cast<int64_t>(x.size()), t = static_cast<int64_t>(tgt_in.size());
      const at::Tensor src = at::tensor(x, at::kLong).view({1, s});
      const at::Tensor in = at::tensor(tgt_in, at::kLong).view({1, t});
      const at::Tensor logits = ck.model->forward(src, at::full({1}, s, at::kLong), in, at::full({1}, t, at::kLong));
      const at::Tensor logp = at::log_softmax(logits[0].to(at::kDouble), -1);  // [T, V]
      for (int64_t k = 0; k < t; ++k) std::printf(k ? " %.6f" : "%.6f", logp[k][labels[k]].item<double>());
      std::printf("\n");
    }
  } catch (const nmt::InputError& e) {
    std::cerr << "teacher_forced_logprobs: error: " << e.what() << "\n";
    return nmt::kExitInput;
  }
  return nmt::kExitOk;
}
