// SentencePiece tokenizers with fixed special ids (see model/transformer.h):
// <pad>=0, <unk>=1, <start>=2, <end>=3.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nmt {

struct TokenizerConfig;

class Tokenizer {
 public:
  // Loads a SentencePiece model file; InputError naming the file on failure.
  explicit Tokenizer(const std::string& model_path);
  // From a model file's bytes (read from a checkpoint); `name` stands for
  // the file in messages and path().
  static Tokenizer from_bytes(const std::string& bytes, const std::string& name);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int64_t> encode(const std::string& text) const;  // no <start>/<end>
  std::string decode(const std::vector<int64_t>& ids) const;   // specials dropped
  std::vector<std::string> pieces(const std::vector<int64_t>& ids) const;
  int64_t piece_id(const std::string& piece) const;  // -1: not in the vocabulary
  int64_t vocab_size() const;
  const std::string& path() const { return path_; }

 private:
  Tokenizer() = default;
  void adopt(void* handle, const char* err);  // checks the special ids, or throws

  std::string path_;
  void* handle_ = nullptr;  // owned by the SentencePiece module (spm_shim.h)
  int64_t vocab_size_ = 0;
};

// What the tokenizers trained for `cfg` depend on, as one string: a
// prepared corpus (data/prepare.h) is trained again when it changes.
std::string tokenizer_settings(const TokenizerConfig& cfg);

// Trains the source and target SentencePiece models (one shared model when
// cfg.shared) on the lines of two files, into dir/src.model and
// dir/tgt.model. InputError naming the file when SentencePiece fails.
void train_tokenizers(const TokenizerConfig& cfg, const std::string& src_lines, const std::string& tgt_lines,
                      const std::string& dir);

}  // namespace nmt
