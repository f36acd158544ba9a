// From a line to the ids a search decodes, and from its ids back to text:
// placeholder masking (SourceText), tokenizing, cutting a source longer than
// the model reads, and what a batch of translations reports (cuts, length
// limits, lost placeholders). One set of rules for every entry point: the
// CLI, the service, Python and validation in training.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/decode_options.h"

namespace nmt {

class Tokenizer;

// The config's decoding settings (greedy unless decode.beam), and whether
// its model was trained on masked placeholders; given the target
// tokenizer, the sentinel ids that constrain its translations
// (decode.placeholder_constraint). corpus_ratio: the training corpus's
// target/source length ratio (TrainingState::target_source_ratio; NaN
// when it records none), from which an unset decode.max_len_factor is
// derived (runtime/length_limit.h). factor_set_by: what set
// decode.max_len_factor, for the log (a flag's name).
DecodeOptions decode_options(const DecodeConfig& decode, bool protect_placeholders, const Tokenizer* target,
                             double corpus_ratio, const std::string& factor_set_by = "decode.max_len_factor");

// A source longer than the model reads (model.max_positions tokens) is cut
// to its first max_positions tokens and translated: one rule for every entry
// point (translate, evaluate, check-po, score, the service, attention maps),
// and each reports the cut (the CLI with a warning naming the lines, the
// service with "cut" in its answer). A long line of a file is then
// translated in part rather than failing the file.
struct SourceCut {
  size_t line;     // index among the lines given
  int64_t tokens;  // the source's length before the cut
};
// Cuts `ids` to `max_positions`; returns its length before the cut.
int64_t fit_source(std::vector<int64_t>& ids, int64_t max_positions);
// One log line for the cuts of a run: "2 sources longer than the 256 tokens
// this model reads were cut to their first 256: line 3 (300 tokens), line 9
// (281 tokens)" (at most 10 named); `first_line` numbers the lines (1 for a file).
std::string describe_cuts(const std::vector<SourceCut>& cuts, int64_t limit, int64_t first_line = 1);

// How many lines of a file are translated at a time (nmt translate,
// Translator::translate_file): 64 batches, few enough that a file of
// millions of lines never sits in memory, many enough that a chunk's tail
// (its last sentences, decoded while the other workers have none left)
// costs little (docs/bench/runtime.md measured 16).
size_t file_chunk_lines(const DecodeOptions& options);

PreparedLine prepare_line(const std::string& line, const Tokenizer& src_tok, int64_t max_positions,
                          const DecodeOptions& options);

// The finished text of line's translation, from the ids decoding gave it:
// detokenized, placeholders restored; "" for a line with no source tokens.
std::string finish_translation(const PreparedLine& line, const std::vector<int64_t>& hyp, const Tokenizer& tgt_tok);

// Whether line's translation `hyp` stopped at the length limit (reached_limit).
bool reached_limit(const PreparedLine& line, const std::vector<int64_t>& hyp, const DecodeOptions& options,
                   int64_t max_positions);

// A translation that lacks placeholders of its line (data::missing_placeholders).
struct LostPlaceholders {
  size_t line;                       // index among the lines given
  std::vector<std::string> missing;  // what it lacks, in the line's order
};

// What translating lines gave: translations[i] translates lines[i].
struct TranslationBatch {
  std::vector<std::string> translations;
  std::vector<SourceCut> cuts;         // lines longer than the model reads, cut to fit (fit_source)
  std::vector<size_t> length_limited;  // lines whose translation stopped at the length limit (reached_limit)
  std::vector<LostPlaceholders> placeholders_lost;
  // What was decoded: each line as the model read it, and its translation's
  // ids (without <start> and <end>), for attention maps and scoring.
  std::vector<PreparedLine> sources;
  std::vector<std::vector<int64_t>> ids;
};

// One log line for translations that lost placeholders of their source
// (TranslationBatch::placeholders_lost; line numbers from `first_line`),
// saying why when the model does not protect placeholders.
std::string describe_lost_placeholders(const std::vector<LostPlaceholders>& lost, size_t count,
                                       bool protect_placeholders, int64_t first_line = 1);

}  // namespace nmt
