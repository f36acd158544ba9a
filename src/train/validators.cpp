#include "train/validators.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <random>

#include "decode/torch_decoding.h"
#include "eval/bleu.h"
#include "train/loss.h"

namespace nmt {

namespace {

// Runs f with the model in eval mode and restores training mode after.
template <typename F>
auto in_eval_mode(Transformer& model, F&& f) {
  const bool was_training = model->is_training();
  model->eval();
  struct Restore {
    Transformer& m;
    bool training;
    ~Restore() { m->train(training); }
  } restore{model, was_training};
  return f();
}

}  // namespace

ValidationContext::ValidationContext(Transformer model, const ParallelCorpus& data,
                                     const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                                     const DecodeOptions& decode, int64_t batch_tokens,
                                     int64_t batch_sentences, int64_t translate_sentences,
                                     c10::Device device)
    : model_(std::move(model)),
      data_(data),
      src_tok_(src_tok),
      tgt_tok_(tgt_tok),
      decode_(decode),
      batch_tokens_(batch_tokens),
      batch_sentences_(batch_sentences),
      device_(device) {
  const int64_t n = std::min<int64_t>(translate_sentences, data.src.size());
  srcs_.assign(data.src_text.begin(), data.src_text.begin() + n);
  refs_.assign(data.tgt_text.begin(), data.tgt_text.begin() + n);
}

const std::vector<std::string>& ValidationContext::hypotheses() {
  if (!decoded_) {
    // The runtime's search, on the model as it is now (its weights change
    // between evaluations).
    TranslationBatch out = in_eval_mode(model_, [&] {
      return training_engine(model_, device_, src_tok_, tgt_tok_, decode_, at::get_num_threads())
          ->translate(srcs_, decode_);
    });
    hyps_ = std::move(out.translations);
    limited_ = std::move(out.length_limited);
    decoded_ = true;
  }
  return hyps_;
}

const std::vector<size_t>& ValidationContext::length_limited() {
  hypotheses();
  return limited_;
}

double LossValidator::validate(ValidationContext& ctx) {
  torch::NoGradGuard no_grad;
  return in_eval_mode(ctx.model(), [&] {
    std::mt19937_64 rng(0);  // the order does not change the sum; fixed all the same
    double sum = 0;
    int64_t tokens = 0;
    const BatchPlan plan = plan_batches(ctx.data(), ctx.batch_tokens(), ctx.batch_sentences(), rng);
    for (size_t k = 0; k < plan.size(); ++k) {
      const Batch b = make_batch(ctx.data(), plan[k]).to(ctx.device());
      sum += token_loss_sum(ctx.model(), b, 0.0).item<double>();
      tokens += b.tokens;
    }
    return tokens ? sum / static_cast<double>(tokens) : std::nan("");
  });
}

double BleuValidator::validate(ValidationContext& ctx) {
  return eval::corpus_bleu(ctx.hypotheses(), ctx.references()).bleu;
}

double ChrfValidator::validate(ValidationContext& ctx) {
  return eval::chrf(ctx.hypotheses(), ctx.references());
}

double LengthLimitedValidator::validate(ValidationContext& ctx) {
  return static_cast<double>(ctx.length_limited().size());
}

double ExactMatchValidator::validate(ValidationContext& ctx) {
  return 100.0 * eval::exact_match(ctx.hypotheses(), ctx.references());
}

std::vector<std::unique_ptr<Validator>> make_validators(bool translate) {
  std::vector<std::unique_ptr<Validator>> v;
  v.push_back(std::make_unique<LossValidator>());
  if (translate) {
    v.push_back(std::make_unique<BleuValidator>());
    v.push_back(std::make_unique<ChrfValidator>());
    v.push_back(std::make_unique<ExactMatchValidator>());
    v.push_back(std::make_unique<LengthLimitedValidator>());
  }
  return v;
}


EarlyStopping::EarlyStopping(bool lower_is_better, int64_t patience)
    : lower_is_better_(lower_is_better),
      patience_(patience),
      best_(lower_is_better ? std::numeric_limits<double>::infinity()
                            : -std::numeric_limits<double>::infinity()) {}

bool EarlyStopping::update(double value) {
  const bool better = lower_is_better_ ? value < best_ : value > best_;  // false for NaN
  if (better) {
    best_ = value;
    evals_since_best_ = 0;
  } else {
    ++evals_since_best_;
  }
  return better;
}

void EarlyStopping::restore(double best, int64_t evals_since_best) {
  if (!std::isnan(best)) best_ = best;  // NaN: no evaluation yet
  evals_since_best_ = evals_since_best;
}

}  // namespace nmt
