// Trains the two small SentencePiece models the tokenizer-step harnesses
// load: spm_models TRAIN_SRC TRAIN_TGT OUT_DIR writes OUT_DIR/src.model and
// OUT_DIR/tgt.model through train_tokenizers, the code nmt prepare uses.
#include <cstdio>
#include <exception>
#include <filesystem>

#include "config/config.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s TRAIN_SRC TRAIN_TGT OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    nmt::TokenizerConfig cfg;
    cfg.src_vocab_size = 1500;
    cfg.tgt_vocab_size = 800;
    // Byte pieces, so that the fuzzed text reaches the byte-fallback paths.
    cfg.byte_fallback = true;
    cfg.placeholder_symbols = true;
    fs::create_directories(argv[3]);
    nmt::train_tokenizers(cfg, argv[1], argv[2], argv[3]);
    // Loading them here proves the shim works in this (sanitized) process.
    const nmt::Tokenizer src((fs::path(argv[3]) / "src.model").string());
    std::printf("spm_models: %s (%lld pieces)\n", src.path().c_str(), static_cast<long long>(src.vocab_size()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spm_models: %s\n", e.what());
    return 1;
  }
  return 0;
}
