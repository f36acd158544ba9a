// What translating asks of a model, whatever runs it: the runtime's own on
// the CPU (runtime/cpu_decoding_model.h), or the LibTorch model on a GPU or
// with LibTorch's attention (decode/torch_decoding_model.h, which only the
// nmt program links). The search, the text pipeline and the worker threads
// (runtime/engine.h) are the same for every one of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/weight_names.h"
#include "runtime/decoder_state.h"

namespace nmt::runtime {

// One layer's attention probabilities for one sentence: [heads, rows, cols].
struct AttentionMap {
  int64_t heads = 0, rows = 0, cols = 0;
  std::vector<float> values;
  float at(int64_t h, int64_t r, int64_t c) const { return values[static_cast<size_t>((h * rows + r) * cols + c)]; }
};

// Every attention probability of a teacher-forced pass, per layer.
struct AttentionMaps {
  std::vector<AttentionMap> encoder_self;  // [H, S, S] per encoder layer
  std::vector<AttentionMap> decoder_self;  // [H, T, T] per decoder layer (causal: upper triangle 0)
  std::vector<AttentionMap> cross;         // [H, T, S] per decoder layer
};

class DecodingModel {
 public:
  virtual ~DecodingModel() = default;

  virtual const ModelShape& shape() const = 0;
  // The slots of a new search (one per search; the model is shared).
  virtual std::unique_ptr<DecoderState> new_state() const = 0;
  // Whether searches may run side by side on several threads, each with
  // single-threaded ops (the CPU), or one at a time (a GPU).
  virtual bool parallel_searches() const = 0;
  // Called on a thread before it decodes: its ops use `threads` threads.
  virtual void use_threads(int threads) const = 0;

  // For each pair: the log-probability of each target token y1 .. yn and
  // of <end> given the source and the target prefix (teacher forcing).
  // Sources and targets are ids without specials, at most max_positions
  // long (a source) and max_positions - 1 (a target); an empty source reads
  // <end> alone, as decoding an empty line does.
  virtual std::vector<std::vector<double>> score(const std::vector<std::vector<int64_t>>& sources,
                                                 const std::vector<std::vector<int64_t>>& targets) const = 0;
  // The attention probabilities of one teacher-forced pass over src and
  // <start> hyp (the ids decoding produced: row t of the decoder maps is the
  // step that produced token t, hyp's then <end>).
  virtual AttentionMaps attention(const std::vector<int64_t>& src, const std::vector<int64_t>& hyp) const = 0;

  // What runs it, in words: "CPU runtime: int8, flash attention, avx512 kernels".
  virtual std::string description() const = 0;
};

}  // namespace nmt::runtime
