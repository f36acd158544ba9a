// Decoding: greedy or beam search, with cached keys/values (or full
// recomputation of the prefix, kept for comparison), batched.
#pragma once

#include <torch/nn.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "data/placeholder_mask.h"
#include "model/transformer.h"

namespace nmt {

class Tokenizer;

struct DecodeOptions {
  int64_t beam = 0;              // 0 = greedy; K >= 1 = beam search (K = 1 equals greedy)
  double length_penalty = 0.0;   // GNMT alpha: score / ((5 + len) / 6)^alpha
  int64_t max_len = 80;          // target tokens before stopping
  double max_len_factor = 0.0;   // ... or factor × source tokens + kLengthSlack, if fewer (0: off)
  int64_t batch_size = 64;       // sentences decoded together
  bool use_cache = true;         // false: recompute the whole prefix every step
  // Beam search ends a sentence once no live beam can beat its best ended
  // one; false waits for every beam to end. The same translations (tested).
  bool beam_early_stop = true;
  // Batches decoded side by side on the CPU, each by its own thread with
  // single-threaded ops (0: as many as the intra-op threads set; 1: one batch
  // at a time, its ops using every thread). A decoding step is many small
  // ops: on a few cores, waking and joining a thread pool for each costs more
  // than it saves (on 2 cores, 2 threads translate a batch of 32 slower than
  // 1), so whole batches are the better unit of parallel work.
  int64_t parallel_batches = 0;
  // Stop at the next batch once SIGINT/SIGTERM came (throws Interrupted).
  // The service turns it off: it finishes every request it has read.
  bool stop_on_interrupt = true;
  // Sources masked and translations restored (tokenizer.protect_placeholders,
  // data/placeholder_mask.h): set from the model's config, never by hand.
  bool protect_placeholders = false;
  // With protection, the target ids of sentinels 1..kMaxSentinels (-1:
  // not in the vocabulary): decoding then writes each of a source's
  // sentinels as often as the source has it (decode/placeholder_constraint.h).
  // Empty: unconstrained (decode.placeholder_constraint false).
  std::vector<int64_t> sentinel_ids;
};

constexpr int64_t kLengthSlack = 5;

// The most target tokens decoding may produce for a source of `src_tokens`.
int64_t target_limit(const DecodeOptions& options, int64_t src_tokens);

// The config's decoding settings (greedy), and whether its model was
// trained on masked placeholders; given the target tokenizer, the sentinel
// ids that constrain its translations (decode.placeholder_constraint).
DecodeOptions decode_options(const Config& config, const Tokenizer* target = nullptr);

// What the source tokenizer reads for `line`, and how a translation of it is
// finished: the line itself, or with placeholder protection the masked line
// and the restoring of the source's placeholders.
class SourceText {
 public:
  SourceText(const std::string& line, const DecodeOptions& options);
  const std::string& text() const { return protect_ ? masked_.text : line_; }
  std::string finish(const std::string& translation) const;
  // The target ids of the sentinels its translation must carry (empty
  // without protection or constraint).
  const std::vector<int64_t>& owed() const { return owed_; }

 private:
  std::string line_;
  bool protect_;
  data::MaskedSource masked_;
  std::vector<int64_t> owed_;
};

// sources: token ids without specials. Returns target ids without <start>
// and <end>. Each result depends only on its own source, not on what else is
// in the batch. Empty sources give empty outputs. owed: empty, or for each
// source the sentinel ids its translation must carry (SourceText::owed).
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

// Tokenize, decode in length-sorted batches (options.parallel_batches of them
// at a time on the CPU), detokenize; output i translates line i, whatever
// batch or thread decoded it. Greedy decoding with the cache runs each batch
// as a running batch (ContinuousGreedy) that takes the next lines in length
// order as its sentences end; beam search, fixed batches. Either way each
// line gets decode()'s translation of it alone. An empty line gives an empty
// line. Over-long sources are cut (fit_source) and, when `cuts` is given,
// appended to it.
std::vector<std::string> translate_lines(Transformer& model, const Tokenizer& src_tok,
                                         const Tokenizer& tgt_tok,
                                         const std::vector<std::string>& lines,
                                         const DecodeOptions& options, const c10::Device& device,
                                         std::vector<SourceCut>* cuts = nullptr);

}  // namespace nmt
