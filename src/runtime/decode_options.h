// What decoding is asked to do (DecodeOptions) and the lines it is given
// (SourceText, PreparedLine): plain data, no LibTorch, so that the service's
// batching policy (serve/batcher.h) can hold prepared lines.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/placeholder_mask.h"

namespace nmt {

// A checkpoint's options come from its config's decode section
// (Translator::decode_options); these defaults are that section's, except
// the length factor, whose default (auto) needs the training corpus's ratio.
struct DecodeOptions {
  int64_t beam = DecodeConfig{}.beam;                      // 0 = greedy; K >= 1 = beam search (K = 1 equals greedy)
  double length_penalty = DecodeConfig{}.length_penalty;   // GNMT alpha: score / ((5 + len) / 6)^alpha
  int64_t max_len = DecodeConfig{}.max_len;                // target tokens before stopping
  double max_len_factor = 0.0;   // ... or factor × source tokens + kLengthSlack, if fewer (0: off)
  // Where max_len_factor came from, in words, for the log (runtime/length_limit.h).
  std::string max_len_origin;
  int64_t batch_size = DecodeConfig{}.batch_size;          // sentences decoded together
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
  // The caller's stop (TranslationOptions::cancel): checked at every step,
  // throwing Cancelled once set. Null: none.
  const std::atomic<bool>* cancel = nullptr;
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

// The most target tokens decoding may produce for a source of `src_tokens`
// by the options alone (max_len, max_len_factor).
int64_t target_limit(const DecodeOptions& options, int64_t src_tokens);
// ... and by the model too: its positions hold <start> and the tokens
// before the last. Every decoder stops a sentence there.
int64_t decode_limit(const DecodeOptions& options, int64_t max_positions, int64_t src_tokens);
// Whether a translation of `hyp_tokens` (without <start>/<end>) stopped at
// that limit rather than ending: decoding stops a sentence when it reaches
// the limit, so one that ended has fewer tokens.
bool reached_limit(const DecodeOptions& options, int64_t max_positions, int64_t src_tokens, int64_t hyp_tokens);

// What the source tokenizer reads for `line`, and how a translation of it is
// finished: the line itself, or with placeholder protection the masked line
// and the restoring of the source's placeholders.
class SourceText {
 public:
  SourceText(const std::string& line, const DecodeOptions& options);
  const std::string& text() const { return protect_ ? masked_.text : line_; }
  // The line as given (placeholders and all).
  const std::string& line() const { return line_; }
  std::string finish(const std::string& translation) const;
  // Text to show a person (a token of an attention map): with protection,
  // sentinels written as the source's placeholders (data::show_sentinels).
  std::string shown(const std::string& text) const;
  // The target ids of the sentinels its translation must carry (empty
  // without protection or constraint).
  const std::vector<int64_t>& owed() const { return owed_; }

 private:
  std::string line_;
  bool protect_;
  data::MaskedSource masked_;
  std::vector<int64_t> owed_;
};

// A line made ready to decode, once: what the source tokenizer read (its
// SourceText, which also finishes the translation) and the token ids, cut to
// what the model reads (fit_source). Every entry point makes its lines with
// prepare_line and decodes them with decode_lines.
struct PreparedLine {
  SourceText text;
  std::vector<int64_t> ids;
  int64_t read_tokens = 0;  // the source's length before the cut
  bool was_cut() const { return read_tokens > static_cast<int64_t>(ids.size()); }
};

}  // namespace nmt
