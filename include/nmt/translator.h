// nmt's translation runtime: a trained model opened for translation, with
// no LibTorch in the process.
//
//   #include <nmt/translator.h>
//
//   nmt::TranslatorOptions options;
//   options.compute_type = nmt::ComputeType::kInt8;
//   options.threads = 2;
//   const nmt::Translator translator("checkpoints/real", options);
//   nmt::TranslationOptions greedy;
//   greedy.beam_size = 0;
//   for (const nmt::TranslationResult& r : translator.translate_batch({"文件不存在"}, greedy))
//     std::cout << r.hypotheses[0] << '\n';
//
// Link with nmt::runtime (find_package(nmt)). Options left unset take the
// checkpoint's config (decode.*, decode.compute_type, train.threads), so a
// checkpoint translates as it was configured unless told otherwise.
//
// Threads: a Translator decodes on threads of its own (TranslatorOptions::
// threads of them), never changing the settings of the threads that call it.
// translate_batch, translate_file and score_batch may be called from several
// threads at once on one Translator: the calls share its threads, and each
// gets exactly what it would get alone (every translation depends only on
// its own line).
//
// Errors: InputError (nmt/errors.h) for a missing or damaged checkpoint, an
// option out of range or a choice this program cannot run, with a one-line
// message naming what is wrong; IoError when a file cannot be read or written.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nmt/errors.h"
#include "nmt/types.h"

namespace nmt {

// How to run the model. Each unset field takes the checkpoint's config.
struct TranslatorOptions {
  std::optional<Device> device;             // attention.device
  std::optional<ComputeType> compute_type;  // decode.compute_type
  std::optional<int> threads;               // train.threads; 0 = every core
  // The checkpoint's attention.backend when it is naive or flash; a model
  // trained with LibTorch's attention translates with flash (the same
  // function, the runtime's kernels) unless this says kTorch.
  std::optional<AttentionBackend> attention;
  // Searches side by side, each on one of the threads with single-threaded
  // ops (default: one per thread; 1: one search at a time using every
  // thread, the fastest for a single sentence).
  std::optional<int> parallel_batches;
};

// What one call asks. Each unset field takes the checkpoint's decode.*.
struct TranslationOptions {
  // Derive the length factor from the training corpus (decode.max_len_factor: auto).
  static constexpr double kAutoLengthFactor = -1;

  std::optional<int> beam_size;              // decode.beam: 0 (or 1) greedy, K >= 2 beam search of K
  std::optional<double> length_penalty;      // decode.length_penalty: GNMT's alpha, 0 none
  std::optional<int> max_decoding_length;    // decode.max_len: target tokens at most
  // decode.max_len_factor: also stop after factor x source tokens + 5 target
  // tokens (0 off, kAutoLengthFactor derived from the training corpus).
  std::optional<double> max_length_factor;
  std::optional<int> max_batch_size;         // decode.batch_size: sentences decoded together
  // decode.placeholder_constraint: with a placeholder-protected model, every
  // placeholder of a line comes out as often as it goes in.
  std::optional<bool> placeholder_constraint;
  // Set to true (from another thread) to stop the call: it ends at its next
  // decoding step, throwing Cancelled (Python's Ctrl-C uses it). Null: runs
  // to its end.
  const std::atomic<bool>* cancel = nullptr;
};

struct TranslationResult {
  std::vector<std::string> hypotheses;  // the translation (best first)
  int64_t source_tokens = 0;            // the tokens the model read of the line
  // The line was longer than the model reads: its first source_tokens were translated.
  bool source_cut = false;
  // The translation stopped at the length limit before ending: it may be cut short.
  bool length_limited = false;
  // Placeholders of the line ("%s", "{0}", ...) the translation lacks.
  std::vector<std::string> placeholders_lost;
};

// What translate_file did.
struct TranslationStats {
  int64_t lines = 0;
  double seconds = 0;
  int64_t source_cut = 0, length_limited = 0, placeholders_lost = 0;  // lines of each kind
};

class NMT_API Translator {
 public:
  // path: a checkpoint folder, or a run folder (its best/, else last/).
  explicit Translator(const std::string& path, const TranslatorOptions& options = {});
  ~Translator();
  Translator(Translator&&) noexcept;
  Translator& operator=(Translator&&) noexcept;

  // One result per line, in order (an empty line gives an empty translation).
  std::vector<TranslationResult> translate_batch(const std::vector<std::string>& lines,
                                                 const TranslationOptions& options = {}) const;
  // Every line of `input` (UTF-8 text, one sentence a line) translated into
  // `output`, written whole or not at all (no half-written file on an error
  // or an interrupt), in chunks so that a large file never sits in memory.
  TranslationStats translate_file(const std::string& input, const std::string& output,
                                  const TranslationOptions& options = {}) const;
  // For each (source, target) pair: the log-probability the model gives each
  // target token and <end>, given the source (teacher forcing).
  std::vector<std::vector<double>> score_batch(const std::vector<std::string>& sources,
                                               const std::vector<std::string>& targets) const;

  // "checkpoints/real/best (step 946)"
  std::string model_name() const;
  // How it runs: "CPU runtime: int8, flash attention, avx512 kernels; 2 threads".
  std::string description() const;

  // The library's own view of it (src/runtime/translator_impl.h), for nmt's
  // command line and service.
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace nmt
