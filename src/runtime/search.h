// Greedy and beam search with continuous batching: sentences join a running
// batch between steps and leave it the step they finish, so a service's
// batch stays full under load instead of waiting for its longest sentence
// (iteration-level scheduling). A row of the batch is one hypothesis: a
// greedy sentence has one, a beam sentence up to K, and sentences of any
// beam width run side by side. Every row is decoded at its own position by
// one step of the model (runtime/decoder_state.h, on any device); the two
// searches differ only in how a sentence picks its next rows from their
// logits (argmax, or the K best continuations). Each sentence gets the
// tokens it gets decoded alone (tested against that).
//
// A row's cache stays in its slot: joining copies only the newcomers'
// encoder keys/values, once per sentence (its hypotheses all read them from
// their sentence's cross slot); a beam hypothesis continues in its parent's
// slot (its first continuation) or in a slot its parent's self-attention
// keys/values are copied to (the others, into the slots of hypotheses that
// had none); a finished row is replaced by the last one (one row copied,
// not the batch). This is the one search, and run_search below the one loop
// that drives it: translate, evaluate, check-po, Python, validation in
// training and the service's workers all run them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/decode_options.h"
#include "runtime/decoder_state.h"
#include "runtime/placeholder_constraint.h"

namespace nmt::runtime {

// logits: [rows, V] row-major -> the argmax of each row (as torch.argmax:
// the first of equal values, NaN above all).
std::vector<int64_t> argmax_rows(const float* logits, int64_t rows, int64_t vocab);

// The rules of beam search, in one place.
namespace beam_rules {
// GNMT's length normalization ((5 + len) / 6)^alpha; 1 for alpha 0.
double length_norm(double alpha, size_t len);
// GNMT's score of an ended hypothesis: log P / length_norm(|Y|), |Y| its
// tokens plus <end> when it has one. The best of these is the translation.
double normalized(double score, size_t tokens, bool has_end, double alpha);
// A sentence's search is over when no live hypothesis is left, or (with
// early_stop and alpha >= 0) when none can beat its best ended one: log-
// probabilities only fall as a hypothesis grows and the penalty divides them
// (negative) by at most length_norm(limit + 1), so a live one of score s
// ends, at best, at s / length_norm(limit + 1). Exact: the same translation
// as waiting for every hypothesis to end. best_ended: the best normalized
// score of an ended one (-inf: none); best_live: the best raw score of a
// live one (-inf: none).
bool done(double best_ended, double best_live, int64_t limit, double alpha, bool early_stop);
}  // namespace beam_rules

class Search {
 public:
  // options: max_len and max_len_factor bound each sentence's length;
  // options.beam is the width of sentences added without one (0: greedy),
  // length_penalty and beam_early_stop rule every beam sentence; the
  // sentinel ids constrain sentences that owe some. max_positions: the
  // model's (a row feeds <start> and every token but its last).
  Search(std::unique_ptr<DecoderState> state, DecodeOptions options, int64_t max_positions);

  // Encodes the sources (token ids without specials, each non-empty) and adds
  // them to the batch; ticket i names sources[i] when it finishes. owed:
  // empty, or the sentinel ids each translation must carry (SourceText::owed).
  // beams: empty (options.beam for all), or each source's width (0 greedy,
  // K >= 1 a beam of K): one encoder pass for them all.
  void add(const std::vector<std::vector<int64_t>>& sources, const std::vector<uint64_t>& tickets,
           const std::vector<std::vector<int64_t>>& owed = {}, const std::vector<int64_t>& beams = {});
  // One step for every row; returns the sentences that finished: (ticket, ids
  // without <start>/<end>).
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> step();
  // Rows of the next step (hypotheses), and the sentences they belong to.
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }
  int64_t sentences() const { return static_cast<int64_t>(sentences_.size()); }
  // Source tokens of the running sentences (a service's batching budget).
  int64_t source_tokens() const { return source_tokens_; }
  // Rows whose keys/values were copied so far: beam hypotheses that
  // continue a parent which already has one continuation in its own row
  // (what a step of beam search costs beyond the model; a benchmark figure).
  int64_t rows_copied() const { return rows_copied_; }
  // The most rows and the longest source this batch will hold, when the
  // caller knows them (decode_lines feeds lines longest first): the slots
  // are then made that size once, instead of growing (a copy of every row in
  // use and fresh zeroed memory each time) as longer sources arrive.
  void plan(int64_t rows, int64_t longest_source) { planned_rows_ = rows, planned_src_ = longest_source; }
  // Frees the slots and the step's workspace when no row is running (else
  // does nothing): a burst's large batch would otherwise keep its memory
  // for as long as the batch lives. The next add() makes them anew.
  void release();
  const DecodeOptions& options() const { return options_; }
  // The slots (tests read how many rows they hold room for).
  const DecoderState& state() const { return *state_; }
  // Cross slots taken so far, finished sentences' included (tests).
  int64_t cross_slots_taken() const { return cross_slots_used_; }

 private:
  struct Row {
    int64_t sentence;   // key in sentences_
    int64_t position;   // tokens fed so far (<start> included)
    int64_t next;       // the token to feed next
    std::vector<int64_t> out;  // tokens so far, without <start>
    double score = 0;   // beam: log-probability so far
    int64_t rank = 0;   // beam: place among the sentence's hypotheses at the last selection
  };
  // A hypothesis that ended (<end>, or the length limit) and is still among
  // its sentence's K best.
  struct Ended {
    std::vector<int64_t> out;
    double score;
    bool has_end;
    int64_t rank;
  };
  struct Sentence {
    uint64_t ticket;
    int64_t beam;       // 0: greedy
    int64_t limit;      // target tokens at most
    int64_t src_len;
    std::vector<int64_t> owed;  // the sentinel ids its translation must carry
    bool constrained = false;
    std::vector<Ended> ended;   // beam: by rank
    int64_t cross_slot = -1;    // where its encoder keys/values are
  };
  // A continuation a beam sentence may pick: its score, and where it comes from.
  struct Candidate {
    double score;
    int64_t row;    // the parent row; -1 for an ended hypothesis carried unchanged
    int64_t token;  // the token it adds (kEndId: it ends), or the ended hypothesis's index
    int64_t order;  // ties: ended ones first by rank, then rank * V + token
  };

  // Grows the slots to hold `slots` rows, `positions` fed tokens and `src`
  // source tokens per row (doubling), keeping the first `in_use` rows.
  void reserve(int64_t slots, int64_t positions, int64_t src, int64_t in_use);
  // A free cross slot (the slots hold room for as many as there are rows,
  // and a sentence has at least one row), and a finished sentence's given back.
  int64_t take_cross_slot();
  void drop_sentence(int64_t s);
  // Moves the last row into slot r and drops the last.
  void remove(int64_t r);
  // Copies row `from`'s self-attention keys/values (its fed positions) to row `to`.
  void copy_row(int64_t to, int64_t from);
  // The K best continuations of beam sentence `s` (rows `rows`, rank order)
  // after this step's logits, and the new hypotheses they make. Rows to drop
  // go to `dropped`; a finished sentence's translation to `finished`.
  void select_beam(int64_t s, const std::vector<int64_t>& rows, int64_t vocab, std::vector<int64_t>& dropped,
                   std::vector<std::pair<uint64_t, std::vector<int64_t>>>& finished);

  std::unique_ptr<DecoderState> state_;
  int64_t planned_rows_ = 0, planned_src_ = 0;  // plan()'s
  DecodeOptions options_;
  PlaceholderConstraint constraint_;
  int64_t max_positions_;
  int64_t capacity_;  // positions a row may feed at most
  std::vector<Row> rows_;
  std::map<int64_t, Sentence> sentences_;
  int64_t next_sentence_ = 0;
  std::vector<int64_t> free_cross_;  // cross slots of finished sentences
  int64_t cross_slots_used_ = 0;     // cross slots [0, this) were taken at some point
  int64_t source_tokens_ = 0;
  int64_t rows_copied_ = 0;
  // This step's beam rows: each one's K largest logits (top_stride_ apart,
  // token ids and values), its largest logit and its log-sum (ops/top_k).
  std::vector<int64_t> top_index_;
  std::vector<float> top_value_, row_max_;
  std::vector<double> row_log_sum_;
  int64_t top_stride_ = 0;
};

// What feeds a search: which sentences join it before each step, and what
// becomes of those that end. The Engine's feed is a list of lines, longest
// first (runtime/engine.cpp); each of the service's workers has one fed by
// its request queue (serve/translation_service.cpp).
class SearchFeed {
 public:
  virtual ~SearchFeed() = default;
  // Before each step: adds the sentences that may join now (search.add).
  // Returns false once nothing more will come; the search then runs until
  // its last row ends. May wait while the search is empty (a service
  // waiting for requests).
  virtual bool join(Search& search) = 0;
  // After each step: the sentences that ended, (ticket, ids).
  virtual void ended(std::vector<std::pair<uint64_t, std::vector<int64_t>>> finished) = 0;
};

// The one loop that runs a search, for every entry point: join, step, hand
// back what ended, until the feed is done and no row is left. Before each
// step it stops by throwing once SIGINT/SIGTERM came (Interrupted, with the
// search's options.stop_on_interrupt) or its options.cancel is set
// (Cancelled); a throw from the feed or the step ends it too.
void run_search(Search& search, SearchFeed& feed);

}  // namespace nmt::runtime
