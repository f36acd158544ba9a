// Validation: each metric a Validator that knows whether lower is better,
// and an early-stopping tracker that keeps the best value (Marian's
// validators and stalled()). Translation metrics share one greedy decode of
// the validation subset per evaluation.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/transformer.h"
#include "runtime/translation.h"
#include "model/transformer.h"

namespace nmt {

class Tokenizer;

// What the validators of one evaluation share.
class ValidationContext {
 public:
  ValidationContext(Transformer model, const ParallelCorpus& data, const Tokenizer& src_tok,
                    const Tokenizer& tgt_tok, const DecodeOptions& decode, int64_t batch_tokens,
                    int64_t batch_sentences, int64_t translate_sentences, c10::Device device);

  Transformer& model() { return model_; }
  const ParallelCorpus& data() const { return data_; }
  int64_t batch_tokens() const { return batch_tokens_; }
  int64_t batch_sentences() const { return batch_sentences_; }
  const c10::Device& device() const { return device_; }
  // Greedy translations of the first translate_sentences pairs and their
  // references; decoded on first use, once per evaluation.
  const std::vector<std::string>& hypotheses();
  const std::vector<std::string>& references() const { return refs_; }
  // Of those translations, the ones that stopped at the length limit
  // (reached_limit), by index.
  const std::vector<size_t>& length_limited();
  const DecodeOptions& decode() const { return decode_; }
  // Forgets the translations (the model has changed).
  void reset() { hyps_.clear(), limited_.clear(), decoded_ = false; }

 private:
  Transformer model_;
  const ParallelCorpus& data_;
  const Tokenizer& src_tok_;
  const Tokenizer& tgt_tok_;
  DecodeOptions decode_;
  int64_t batch_tokens_, batch_sentences_;
  c10::Device device_;
  std::vector<std::string> srcs_, refs_, hyps_;
  std::vector<size_t> limited_;
  bool decoded_ = false;
};

class Validator {
 public:
  virtual ~Validator() = default;
  virtual std::string name() const = 0;  // "loss", "bleu", ...
  virtual bool lower_is_better() const = 0;
  virtual double validate(ValidationContext& ctx) = 0;
};

// Unsmoothed cross-entropy per target token over the whole validation data.
class LossValidator final : public Validator {
 public:
  std::string name() const override { return "loss"; }
  bool lower_is_better() const override { return true; }
  double validate(ValidationContext& ctx) override;
};

// sacreBLEU-compatible corpus BLEU of the greedy translations.
class BleuValidator final : public Validator {
 public:
  std::string name() const override { return "bleu"; }
  bool lower_is_better() const override { return false; }
  double validate(ValidationContext& ctx) override;
};

class ChrfValidator final : public Validator {
 public:
  std::string name() const override { return "chrf"; }
  bool lower_is_better() const override { return false; }
  double validate(ValidationContext& ctx) override;
};

// How many of the greedy translations stopped at the length limit before
// ending (runtime/length_limit.h): a limit too tight for the corpus cuts
// translations short, and BLEU alone would not say why it is low.
class LengthLimitedValidator final : public Validator {
 public:
  std::string name() const override { return "length_limited"; }
  bool lower_is_better() const override { return true; }
  double validate(ValidationContext& ctx) override;
};

// Percentage of translations equal to their reference.
class ExactMatchValidator final : public Validator {
 public:
  std::string name() const override { return "exact"; }
  bool lower_is_better() const override { return false; }
  double validate(ValidationContext& ctx) override;
};

// The validators a run uses: loss always, the translation metrics when
// translate_sentences > 0.
std::vector<std::unique_ptr<Validator>> make_validators(bool translate);

// Keeps the best value of one metric and counts evaluations without
// improvement.
class EarlyStopping {
 public:
  EarlyStopping(bool lower_is_better, int64_t patience);
  // Records a value; true when it is a new best. NaN never is.
  bool update(double value);
  bool stalled() const { return patience_ > 0 && evals_since_best_ >= patience_; }
  double best() const { return best_; }
  int64_t evals_since_best() const { return evals_since_best_; }
  // Continues a run: its best value (NaN when it has none yet) and count.
  void restore(double best, int64_t evals_since_best);

 private:
  bool lower_is_better_;
  int64_t patience_;
  double best_;
  int64_t evals_since_best_ = 0;
};

}  // namespace nmt
