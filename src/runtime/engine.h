// A model opened for translation and everything around it: the tokenizers,
// the checkpoint's decoding settings, the text pipeline (runtime/
// translation.h), the search (runtime/search.h) and the threads it runs on
// (runtime/worker_pool.h). The public nmt::Translator (include/nmt/
// translator.h) is one; the command line, the service and validation in
// training use its fuller interface here. Whatever model it holds
// (runtime/decoding_model.h), the path from a line to its translation is
// this one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/decoding_model.h"
#include "runtime/search.h"
#include "runtime/translation.h"
#include "runtime/worker_pool.h"

namespace nmt {
class Tokenizer;
}

namespace nmt::runtime {

class Engine {
 public:
  // defaults: the checkpoint's decoding settings (decode_options(...)).
  // threads: the workers' count (every core the model uses).
  Engine(std::shared_ptr<const DecodingModel> model, std::shared_ptr<const Tokenizer> source,
         std::shared_ptr<const Tokenizer> target, DecodeOptions defaults, int threads);

  const DecodingModel& model() const { return *model_; }
  const Tokenizer& source_tokenizer() const { return *source_; }
  const Tokenizer& target_tokenizer() const { return *target_; }
  const DecodeOptions& defaults() const { return defaults_; }
  int threads() const { return threads_; }
  int64_t max_positions() const { return model_->shape().max_positions; }

  // The text pipeline: a line made ready to decode once, and the text of a
  // translation from the ids decoding gave it.
  PreparedLine prepare(const std::string& line, const DecodeOptions& options) const;
  std::string finish(const PreparedLine& line, const std::vector<int64_t>& hyp) const;
  bool reached_limit(const PreparedLine& line, const std::vector<int64_t>& hyp, const DecodeOptions& options) const;

  // Decodes prepared lines on the engine's workers: result i holds the
  // target ids (without <start> and <end>) of lines[i], whatever else was
  // decoded with it. Lines are sorted by length; each worker runs a search
  // of up to options.batch_size sentences (times the beam), which takes the
  // next lines, longest first, as its sentences end. An empty line gives no
  // ids. Several threads may call it at once (their lines share the workers).
  std::vector<std::vector<int64_t>> decode(const std::vector<PreparedLine>& lines, const DecodeOptions& options) const;
  // prepare, decode and finish, with what a batch reports.
  TranslationBatch translate(const std::vector<std::string>& lines, const DecodeOptions& options) const;

  // A search of its own, on this thread (the service's running batches).
  // use_threads: the ops of the calling thread run on that many threads.
  std::unique_ptr<Search> new_search(const DecodeOptions& options) const;
  void use_threads(int threads) const { model_->use_threads(threads); }

  // Teacher-forced log-probabilities of each target token and <end>, per
  // pair, the pairs masked as in training when `protect` (the model's
  // tokenizer.protect_placeholders); in length-sorted batches of
  // `batch_size`, a pair's figures its own whatever its batch. A side
  // longer than the model reads is cut to fit (its prefix is scored).
  // InputError when the lists differ in length; Interrupted between
  // batches once SIGINT or SIGTERM came.
  std::vector<std::vector<double>> score(const std::vector<std::string>& sources,
                                         const std::vector<std::string>& targets, bool protect,
                                         int64_t batch_size = 32) const;

  // The attention probabilities behind a translation already made.
  AttentionMaps attention(const PreparedLine& line, const std::vector<int64_t>& hyp) const;

 private:
  std::shared_ptr<const DecodingModel> model_;
  std::shared_ptr<const Tokenizer> source_, target_;
  DecodeOptions defaults_;
  int threads_;
  std::unique_ptr<WorkerPool> pool_;
};

// Mean of a pair's token log-probabilities (the <end> included): a per-token
// score comparable across targets of different lengths.
double mean_logprob(const std::vector<double>& token_logprobs);

}  // namespace nmt::runtime
