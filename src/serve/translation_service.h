// The model side of the service: turns a validated request into a batching
// Job (tokenized, lengths checked) and translates batches with the same
// Translator every command uses (its engine: runtime/engine.h), so an answer
// equals `nmt translate`'s output for the same line. Attention maps, when
// asked, come from a teacher-forced pass over the translation.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eval/input_fit.h"
#include "nmt/translator.h"
#include "runtime/translator_impl.h"
#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/request.h"

namespace nmt::serve {

// What the service translates with.
struct Model {
  const Translator* translator = nullptr;  // owned by the caller, outliving the service
  DecodeOptions decode;  // beam is set per request
  // Batches translated side by side (BatchPolicy::workers); > 1: each on one
  // thread with single-threaded ops.
  int64_t workers = 1;
  // Sentences the explorer offers to translate (GET /v1/info), from the
  // model's own validation sources (example_sentences): a toy model's
  // examples are toy sentences, a software model's software messages.
  std::vector<std::string> examples;
};

// Up to `count` short, distinct lines of `path` (4 to 24 characters),
// spread over its first lines, one with a placeholder among them when it
// has one; none when the file cannot be read.
std::vector<std::string> example_sentences(const std::string& path, size_t count = 3);

class TranslationService {
 public:
  TranslationService(Model model, Metrics& metrics);

  // Tokenizes the lines, once (prepare_line: a line longer than the model
  // reads is cut, and named in Job::cut).
  Job make_job(const TranslateRequest& request) const;
  // The Batcher's runner.
  std::vector<Sentences> run_batch(const std::vector<const Job*>& jobs);
  // The Batcher's stream factory: greedy and beam decoding with continuous
  // batching (decode/continuous_search), the same tokens as run_batch's. Call on the
  // worker thread that uses the stream.
  std::unique_ptr<StepStream> make_stream();
  // JSON for GET /v1/info.
  std::string info_json() const;
  const runtime::Engine& engine() const { return *m_.translator->impl().engine; }
  // Whether the model protects placeholders (what a warning about lost ones says).
  bool protects_placeholders() const { return m_.decode.protect_placeholders; }

 private:
  // {"source": [...], "target_in": [...], "target_out": [...], "encoder_self":
  // [L][H][S][S], "decoder_self": [L][H][T][T], "cross": [L][H][T][S]}
  // The maps of the translation decoding made: the line's ids as decoded,
  // hyp its result (no second decode).
  // Tokens as a person is shown them (sentinels as the line's placeholders:
  // SourceText::shown).
  std::string attention_json(const PreparedLine& line, const std::vector<int64_t>& hyp) const;
  // A sentence's answer from the ids decoding gave it: the finished text,
  // and its attention maps when asked for.
  SentenceResult finish_sentence(const PreparedLine& line, const std::vector<int64_t>& hyp, bool attention,
                                 const DecodeOptions& options) const;
  // The decoding options of a batch of this beam, on this worker's thread.
  DecodeOptions worker_options(int64_t beam) const;

  // Counts a job's source tokens into the fit window (eval/input_fit.h) and
  // logs, at most once a minute, that the requests are unlike what the model
  // was trained on.
  void judge_fit(const Job& job) const;

  class SearchStream;

  Model m_;
  Metrics& metrics_;
  mutable std::mutex fit_mutex_;
  mutable eval::TokenCounts fit_window_;  // the requests' tokens since the last verdict
  mutable std::chrono::steady_clock::time_point last_fit_warning_{};
};

}  // namespace nmt::serve
