// A program of one's own that translates with a trained model: open the
// checkpoint with nmt::Translator, translate lines. It links the inference
// library alone (CMake: target_link_libraries(app PRIVATE nmt_infer)).
// Usage: translate CHECKPOINT [float32|bf16|int8|auto] [BEAM] < chinese.txt > english.txt
#include <iostream>
#include <string>
#include <vector>

#include "decode/translator.h"
#include "util/errors.h"
#include "util/thread_env.h"

int main(int argc, char** argv) {
  nmt::ensure_library_settings(argv);  // thread pools and BLAS kernels, before LibTorch runs
  int beam = -1;  // -1: the checkpoint's decode.beam; 0: greedy
  if (argc > 3) try { beam = std::stoi(argv[3]); } catch (const std::logic_error&) {}
  if (argc < 2 || argc > 4 || (argc > 3 && (beam < 0 || beam > 64))) {
    std::cerr << "usage: translate CHECKPOINT [float32|bf16|int8|auto] [BEAM 0..64] < sentences\n";
    return nmt::kExitInput;
  }
  try {
    nmt::TranslatorOptions options;  // what is left unset comes from the checkpoint's config
    if (argc > 2) options.compute_type = nmt::ops::kComputeTypeChoices.parse(argv[2], "compute type");
    const nmt::Translator translator(argv[1], options);

    nmt::DecodeOptions decode = translator.decode_options();  // the checkpoint's decode.* settings
    if (beam >= 0) decode.beam = beam;

    std::vector<std::string> lines;
    for (std::string line; std::getline(std::cin, line);) lines.push_back(line);
    for (const std::string& english : translator.translate_batch(lines, decode).translations)
      std::cout << english << '\n';
  } catch (const nmt::InputError& e) {
    std::cerr << "translate: error: " << e.what() << '\n';
    return nmt::kExitInput;
  }
}
