// Shared by the harnesses: failing loudly, and the tokenizers they load once.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace nmt::fuzz {

// A broken property: abort, so libFuzzer records the input as a crash.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// The models built by spm_models.cpp (NMT_FUZZ_SPM_DIR is set by CMake).
inline const Tokenizer& src_tokenizer() {
  static const Tokenizer tok(std::string(NMT_FUZZ_SPM_DIR) + "/src.model");
  return tok;
}
inline const Tokenizer& tgt_tokenizer() {
  static const Tokenizer tok(std::string(NMT_FUZZ_SPM_DIR) + "/tgt.model");
  return tok;
}

// Ids of one line, each checked to be a piece of the model.
inline std::vector<int64_t> encode_checked(const Tokenizer& tok, const std::string& line) {
  std::vector<int64_t> ids = tok.encode(line);
  for (int64_t id : ids)
    check(id >= 0 && id < tok.vocab_size(), "id " + std::to_string(id) + " outside the vocabulary");
  return ids;
}

}  // namespace nmt::fuzz
