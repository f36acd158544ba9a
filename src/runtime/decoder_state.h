// What a search (runtime/search.h) asks of a model: the keys and values of
// its running batch, kept in slots, and one decoder step over them. The
// runtime's own model implements it on the CPU (runtime/cpu_decoder_state.h);
// the LibTorch model implements it for a GPU and for LibTorch's attention
// (decode/torch_decoder_state.h), so that one search drives every device.
//
// Slots: row r of the batch lives in slot r of every decoder layer's
// self-attention cache (its positions [0, fed) filled); a sentence's encoder
// keys and values live in a cross slot of its own, which all its rows (its
// beam's hypotheses) read. Slots start as zeros and only ever hold finite
// values, so a row may read past its own position (masked, probability 0).
#pragma once

#include <cstdint>
#include <vector>

namespace nmt::runtime {

class DecoderState {
 public:
  virtual ~DecoderState() = default;

  // Room for `rows` slots of `positions` fed tokens each and `src` source
  // tokens per cross slot (never less than there is). The first `rows_in_use`
  // self-attention slots and `cross_in_use` cross slots keep their contents.
  virtual void resize(int64_t rows, int64_t positions, int64_t src, int64_t rows_in_use, int64_t cross_in_use) = 0;
  // Slots held now (0 before the first resize).
  virtual int64_t rows() const = 0;
  virtual int64_t positions() const = 0;
  virtual int64_t source_positions() const = 0;

  // Encodes the sources (ids without specials, non-empty, at most
  // source_positions() tokens) in one pass and puts each one's encoder keys
  // and values into cross slot cross_slots[i].
  virtual void add_sources(const std::vector<std::vector<int64_t>>& sources, const std::vector<int64_t>& cross_slots) = 0;

  // One step of rows [0, n): row r feeds tokens[r] at position positions[r]
  // (tokens it has fed so far), reads cross slot cross_rows[r] up to
  // src_lengths[r] keys. Returns the logits [n, V], float32 in host memory
  // the state owns (the search may change them: the placeholder
  // constraint), valid until the next call.
  virtual float* step(int64_t n, const int64_t* tokens, const int64_t* positions, const int64_t* cross_rows,
                      const int64_t* src_lengths) = 0;

  // Copies slot `from`'s self-attention keys/values (its first `positions`) to slot `to`.
  virtual void copy_row(int64_t to, int64_t from, int64_t positions) = 0;

  // Frees the slots and the step's scratch (the next resize makes them anew).
  virtual void release() = 0;

  // The target vocabulary V (the logits' width).
  virtual int64_t vocab() const = 0;
};

}  // namespace nmt::runtime
