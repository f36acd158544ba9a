// Fixed special token ids, the same in every vocabulary: tokenizers are
// trained with them, batches are built from them, and the model masks and
// decodes by them.
#pragma once

#include <cstdint>

namespace nmt {

constexpr int64_t kPadId = 0;
constexpr int64_t kUnkId = 1;
constexpr int64_t kStartId = 2;
constexpr int64_t kEndId = 3;

}  // namespace nmt
