// A trained model as a CTranslate2 model directory: `model.bin` in
// CTranslate2's binary layout (version 6, "TransformerSpec"), `config.json`,
// `source_vocabulary.json` / `target_vocabulary.json`, and the two
// SentencePiece models, so `ctranslate2.Translator(DIR)` loads it as it is,
// without conversion tools.
//
// Every parameter of the model is mapped (pre-norm layers with final norms,
// fused QKV and KV projections, ReLU feed-forward, tied or separate output
// projection); the position table is written out rather than left to
// CTranslate2's own sinusoid, which orders sin/cos differently and starts at
// position 1. A parameter the mapping does not know is an ExportError, never
// a silently different model.
#pragma once

#include <cstdint>
#include <string>

#include "util/errors.h"

namespace nmt {

struct LoadedCheckpoint;

// The model cannot be expressed in the target format; names what and why.
// Bad input like any other (exit 2).
class ExportError : public InputError {
 public:
  explicit ExportError(const std::string& what) : InputError("cannot export: " + what) {}
};

struct ExportSummary {
  int64_t variables = 0;  // tensors and scalars written to model.bin
  int64_t aliases = 0;    // variables stored once and named twice (tied embeddings)
  int64_t bytes = 0;      // size of model.bin
  int64_t src_vocab = 0, tgt_vocab = 0;
};

// Writes `ck`'s model to `output`: a folder that does not exist yet or is
// empty, or with `overwrite` an earlier export (it holds nmt_export.json and
// only the files an export writes), replaced as a whole, atomically. Any
// other folder is refused (InputError naming a file the export did not
// write): nothing of the user's is ever deleted. The folder is
// staged beside `output` and renamed into place: a failure or an interrupt
// leaves no half-written model directory.
ExportSummary export_ctranslate2(const LoadedCheckpoint& ck, const std::string& output, bool overwrite);

}  // namespace nmt
