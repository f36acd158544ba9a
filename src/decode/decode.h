// Decoding: greedy or beam search, with cached keys/values (or full
// recomputation of the prefix, kept for comparison), batched. One loop for
// both searches with the cache (decode/continuous_search.h), and a reference
// beam search without it (K = 1 for greedy).
#pragma once

#include <torch/nn.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "decode/decode_options.h"
#include "model/transformer.h"

namespace nmt {

class Tokenizer;

// The config's decoding settings (greedy), and whether its model was
// trained on masked placeholders; given the target tokenizer, the sentinel
// ids that constrain its translations (decode.placeholder_constraint).
// corpus_ratio: the training corpus's target/source length ratio (the
// checkpoint's TrainingState::target_source_ratio; NaN when it records
// none), from which an unset decode.max_len_factor is derived
// (decode/length_limit.h).
// factor_set_by: what set decode.max_len_factor, for the log (a flag's name).
DecodeOptions decode_options(const Config& config, const Tokenizer* target, double corpus_ratio,
                             const std::string& factor_set_by = "decode.max_len_factor");
// The same from a decode section and tokenizer.protect_placeholders alone.
DecodeOptions decode_options(const DecodeConfig& decode, bool protect_placeholders, const Tokenizer* target,
                             double corpus_ratio, const std::string& factor_set_by = "decode.max_len_factor");

// sources: token ids without specials. Returns target ids without <start>
// and <end>. Each result depends only on its own source, not on what else is
// in the batch. Empty sources give empty outputs. owed: empty, or for each
// source the sentinel ids its translation must carry (SourceText::owed).
// With the cache, greedy and beam search run as a running batch that every
// sentence joins at once (ContinuousSearch); without it, as a fixed batch
// (greedy as beam search with one beam).
std::vector<std::vector<int64_t>> decode(Transformer& model,
                                         const std::vector<std::vector<int64_t>>& sources,
                                         const DecodeOptions& options, const c10::Device& device,
                                         const std::vector<std::vector<int64_t>>& owed = {});

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
// Cuts `ids` to what `model` reads; returns its length before the cut.
int64_t fit_source(std::vector<int64_t>& ids, const Transformer& model);
// One log line for the cuts of a run: "2 sources longer than the 256 tokens
// this model reads were cut to their first 256: line 3 (300 tokens), line 9
// (281 tokens)" (at most 10 named); `first_line` numbers the lines (1 for a file).
std::string describe_cuts(const std::vector<SourceCut>& cuts, int64_t limit, int64_t first_line = 1);

PreparedLine prepare_line(const std::string& line, const Tokenizer& src_tok, const Transformer& model,
                          const DecodeOptions& options);

// Decodes prepared lines in length-sorted batches (options.parallel_batches
// of them at a time on the CPU): result i holds the target ids (without
// <start> and <end>) of lines[i], whatever batch or thread decoded it.
// With the cache, each batch runs as a running batch (ContinuousSearch,
// greedy or beam) that takes the next lines in length order as its
// sentences end; without it, fixed batches. Either way each line gets
// decode()'s translation of it alone. An empty line gives no ids.
std::vector<std::vector<int64_t>> decode_lines(Transformer& model, const std::vector<PreparedLine>& lines,
                                               const DecodeOptions& options, const c10::Device& device);

// The finished text of line's translation, from the ids decoding gave it:
// detokenized, placeholders restored; "" for a line with no source tokens.
std::string finish_translation(const PreparedLine& line, const std::vector<int64_t>& hyp, const Tokenizer& tgt_tok);

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

// prepare_line, decode_lines and the finished text of each translation
// (detokenized, placeholders restored). An empty line gives an empty line.
TranslationBatch translate_lines(Transformer& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                                 const std::vector<std::string>& lines, const DecodeOptions& options,
                                 const c10::Device& device);

// One log line for translations that lost placeholders of their source
// (TranslationBatch::placeholders_lost; line numbers from `first_line`),
// saying why when the model does not protect placeholders.
std::string describe_lost_placeholders(const std::vector<LostPlaceholders>& lost, size_t count,
                                       bool protect_placeholders, int64_t first_line = 1);

// Whether line's translation `hyp` stopped at the length limit (reached_limit).
bool reached_limit(const PreparedLine& line, const std::vector<int64_t>& hyp, const DecodeOptions& options,
                   const Transformer& model);

// The attention probabilities behind a translation: one teacher-forced pass
// over src (ids as decoded) and <start> hyp (the ids decoding produced), so
// row t of the decoder maps is the step that produced token t (hyp's, then
// <end>). No decoding: the maps of the translation the caller already has.
AttentionMaps translation_attention(Transformer& model, const std::vector<int64_t>& src,
                                    const std::vector<int64_t>& hyp, const c10::Device& device);

}  // namespace nmt
