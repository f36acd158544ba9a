// Preparing a training corpus once (`nmt prepare`, and `nmt train` when the
// prepared corpus is missing or stale): both sides streamed, never held in
// memory; SentencePiece trained on a deterministic uniform sample of at most
// tokenizer.sample_lines pairs; every pair encoded by all threads into the
// shards of data/shards.h, after filters that are counted and reported. The
// folder is staged beside its place and renamed into it, with a manifest of
// what it was made from, so a crash or Ctrl-C never leaves half a corpus and
// the next run starts cleanly.
//
// A prepared corpus is fresh while its manifest matches: the source files
// (size and modification time, or when the time moved, their SHA-256), the
// tokenizer settings and sample size, and the settings that change which
// pairs are kept (data.max_len, data.max_length_ratio, data.dedupe,
// data.skip_invalid_lines, tokenizer.protect_placeholders). Otherwise it is
// prepared again, saying why in one line; when only the filters changed,
// its tokenizers are kept. Plain C++17 (no LibTorch).
#pragma once

#include <cstdint>
#include <string>

namespace nmt {

struct Config;

namespace data {

struct PrepareOptions {
  // Tokenizers to encode with (a resumed run's, or rank 0's for the other
  // ranks), as model file bytes; null: trained, or kept from the folder.
  const std::string* src_model = nullptr;
  const std::string* tgt_model = nullptr;
  int threads = 0;      // encoding threads; 0: all cores
  bool force = false;   // prepare again even when fresh (nmt prepare --force)
};

struct PrepareReport {
  std::string dir;                   // the prepared corpus
  std::string src_model, tgt_model;  // its tokenizers (DIR/src.model, DIR/tgt.model)
  bool reused = false;               // it was fresh: nothing was done
  std::string reason;                // why it was prepared ("" when reused)
  bool tokenizers_trained = false;
  int64_t lines = 0;                 // pairs read
  int64_t pairs = 0;                 // pairs kept
  int64_t empty = 0;                 // dropped: a side empty (or no tokens)
  int64_t too_long = 0;              // ... over data.max_len tokens
  int64_t ratio = 0;                 // ... lengths further apart than data.max_length_ratio
  int64_t duplicates = 0;            // ... an exact copy of an earlier pair (data.dedupe)
  int64_t invalid = 0;               // ... not UTF-8 or holding a NUL (data.skip_invalid_lines)
  int64_t sampled = 0;               // pairs the tokenizers were trained on
  int64_t shards = 0;
  uint64_t src_tokens = 0, tgt_tokens = 0;
  // The kept pairs' target/source length ratio that kLengthRatioQuantile of
  // them stay within (runtime/length_limit.h): what decoding's length limit
  // is derived from.
  double target_source_ratio = 0;
  int id_bytes = 0;
  double seconds = 0;

  std::string summary() const;  // one line for the log
};

// Where cfg's training corpus is prepared: data.prepared_dir/NAME, NAME from
// the two training files' names and a hash of their absolute paths.
std::string prepared_dir_for(const Config& cfg);

// Makes sure cfg's prepared corpus is fresh, preparing it if not; holds a
// lock on it meanwhile (processes preparing the same corpus wait for each
// other). InputError naming the file and line for bad data (line counts
// that differ, a line that is not UTF-8), or the file of a prepared corpus
// that is damaged (prepare it again with force); Interrupted on Ctrl-C,
// leaving no staged folder behind.
PrepareReport prepare_corpus(const Config& cfg, const PrepareOptions& options = {});

}  // namespace data
}  // namespace nmt
