// A program of one's own that translates with a trained model: open the
// checkpoint with nmt::Translator, translate lines. It needs nmt's installed
// runtime alone (CMake: find_package(nmt) and target_link_libraries(app
// PRIVATE nmt::runtime); examples/CMakeLists.txt), no LibTorch.
// Usage: translate CHECKPOINT [float32|bf16|int8|auto] [BEAM] < chinese.txt > english.txt
#include <nmt/translator.h>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  int beam = -1;  // -1: the checkpoint's decode.beam; 0: greedy
  if (argc > 3) try { beam = std::stoi(argv[3]); } catch (const std::logic_error&) {}
  if (argc < 2 || argc > 4 || (argc > 3 && (beam < 0 || beam > 64))) {
    std::cerr << "usage: translate CHECKPOINT [float32|bf16|int8|auto] [BEAM 0..64] < sentences\n";
    return 2;
  }
  try {
    nmt::TranslatorOptions options;  // what is left unset comes from the checkpoint's config
    if (argc > 2) options.compute_type = nmt::parse_compute_type(argv[2], "compute type");
    const nmt::Translator translator(argv[1], options);

    nmt::TranslationOptions decode;  // likewise: the checkpoint's decode.* settings
    if (beam >= 0) decode.beam_size = beam;

    std::vector<std::string> lines;
    for (std::string line; std::getline(std::cin, line);) lines.push_back(line);
    for (const nmt::TranslationResult& r : translator.translate_batch(lines, decode))
      std::cout << r.hypotheses[0] << '\n';
  } catch (const nmt::InputError& e) {
    std::cerr << "translate: error: " << e.what() << '\n';
    return 2;
  }
}
