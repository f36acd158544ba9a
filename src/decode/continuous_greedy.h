// Greedy decoding with continuous batching: sentences join a running batch
// between steps and leave it the step they finish, so a service's batch stays
// full under load instead of waiting for its longest sentence (iteration-level
// scheduling). Every row is decoded at its own position; each sentence gets
// the tokens decode() gives it alone (tested against it). A row's cache stays
// in its slot: joining copies only the newcomers' encoder keys/values, and a
// finished row is replaced by the last one (one row copied, not the batch).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "decode/placeholder_constraint.h"
#include "decode/translator.h"
#include "model/transformer.h"

namespace nmt {

// logits: [B, V] -> the argmax of each row (as torch.argmax: the first of
// equal values, NaN above all).
std::vector<int64_t> argmax_rows(const at::Tensor& logits);

class ContinuousGreedy {
 public:
  // options: max_len and max_len_factor bound each sentence's length (beam is
  // ignored: greedy).
  ContinuousGreedy(Transformer& model, DecodeOptions options, c10::Device device);

  // Encodes the sources (token ids without specials, each non-empty) and adds
  // them to the batch; ticket i names sources[i] when it finishes. owed:
  // empty, or the sentinel ids each translation must carry (SourceText::owed).
  void add(const std::vector<std::vector<int64_t>>& sources, const std::vector<uint64_t>& tickets,
           const std::vector<std::vector<int64_t>>& owed = {});
  // One step for every row; returns the sentences that finished: (ticket, ids
  // without <start>/<end>).
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> step();
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }
  int64_t source_tokens() const { return source_tokens_; }
  // Rows the slot tensors have room for (0 before the first add and after release()).
  int64_t slot_rows() const { return slots_.empty() ? 0 : slots_[0].self_kv.size(0); }
  // The most rows and the longest source this batch will hold, when the
  // caller knows them (decode_lines feeds lines shortest first): the slots
  // are then made that size once, instead of growing (a copy of every row in
  // use and fresh zeroed memory each time) as longer sources arrive.
  void plan(int64_t rows, int64_t longest_source) { planned_rows_ = rows, planned_src_ = longest_source; }
  // Frees the slots and the step's workspace when no row is running (else
  // does nothing): a burst's large batch would otherwise keep its memory
  // for as long as the batch lives. The next add() makes them anew.
  void release();

 private:
  struct Row {
    uint64_t ticket;
    int64_t limit;      // target tokens at most
    int64_t position;   // tokens fed so far (<start> included)
    int64_t next;       // the token to feed next
    int64_t src_len;
    std::vector<int64_t> out;
    std::vector<int64_t> owed;  // the sentinel ids its translation must carry (counted against `out`)
    bool constrained = false;
  };
  // Grows the slot tensors to hold `slots` rows, `positions` fed tokens and
  // `src` source tokens per row (doubling), copying the first `in_use` rows.
  void reserve(int64_t slots, int64_t positions, int64_t src, int64_t in_use, const c10::TensorOptions& opts);
  // Moves the last row into slot r (whose sentence ended) and drops the last.
  void remove(int64_t r);

  Transformer model_;
  int64_t planned_rows_ = 0, planned_src_ = 0;  // plan()'s
  DecodeOptions options_;
  PlaceholderConstraint constraint_;
  c10::Device device_;
  int64_t capacity_;  // positions a row may feed at most
  // Row r of the batch lives in slot r of every layer's tensors: self_kv
  // [slots, positions, 2C], cross_kv [slots, src, 2C]. Rows sit at different
  // positions, so a row's keys/values past its own position are read (and
  // masked, probability 0): slots start as zeros and only ever hold finite
  // values.
  std::vector<Row> rows_;
  std::vector<LayerCache> slots_;
  // Kept across steps: the output table laid out for a step's few rows, and
  // the fused step's scratch (DecoderCache).
  at::Tensor output_table_, step_workspace_, step_key_lengths_;
  int64_t source_tokens_ = 0;
};

}  // namespace nmt
