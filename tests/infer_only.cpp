// A translator built on the inference library alone (nmt_infer: model,
// tokenizers, checkpoint reading, decoding), the way `nmt serve`, `nmt export`
// or a program embedding the model would use it: no trainer, no c10d, no Gloo
// in its link. tests/infer_only_test.sh checks its output against
// `nmt translate` and its symbols against the training library's.
// Usage: infer_only CHECKPOINT < sentences > translations
#include <iostream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "decode/translator.h"
#include "ops/attention/backend.h"
#include "util/device.h"
#include "util/errors.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: infer_only CHECKPOINT < sentences\n";
    return nmt::kExitInput;
  }
  try {
    nmt::LoadedCheckpoint ck = nmt::load_checkpoint(argv[1], c10::kCPU);
    ck.model->set_attention_backend(nmt::ops::parse_backend(ck.cfg.attention.backend));
    nmt::set_threads(ck.cfg.train.threads);
    std::vector<std::string> lines;
    for (std::string line; std::getline(std::cin, line);) lines.push_back(line);
    const nmt::DecodeOptions opts = nmt::decode_options(ck.cfg, nullptr, ck.state.target_source_ratio);
    for (const auto& out : nmt::translate_lines(ck.model, *ck.src_tok, *ck.tgt_tok, lines, opts, c10::kCPU))
      std::cout << out << '\n';
  } catch (const nmt::InputError& e) {
    std::cerr << "infer_only: error: " << e.what() << "\n";
    return nmt::kExitInput;
  }
  return nmt::kExitOk;
}
