#include "train/trainer.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "data/batch_source.h"
#include "model/build.h"
#include "tokenizer/tokenizer.h"
#include "train/train_step.h"
#include "train/validators.h"
#include "util/device.h"
#include "util/errors.h"

namespace nmt {

namespace {

struct Data {
  ParallelCorpus train, valid;
};

Data load_data(const Config& cfg, const Tokenizer& src_tok, const Tokenizer& tgt_tok) {
  Data d{load_parallel(cfg.data.train_src, cfg.data.train_tgt, src_tok, tgt_tok, cfg.data.max_len),
         load_parallel(cfg.data.valid_src, cfg.data.valid_tgt, src_tok, tgt_tok, cfg.data.max_len)};
  d.valid = head(d.valid, cfg.train.valid_max_sentences);
  spdlog::info("data: {} training pairs ({} skipped as longer than {}), {} validation pairs; "
               "vocab {} / {}",
               d.train.src.size(), d.train.skipped, cfg.data.max_len, d.valid.src.size(),
               src_tok.vocab_size(), tgt_tok.vocab_size());
  return d;
}

// Every validator on the validation data; records the best-metric tracker in state.
bool evaluate(std::vector<std::unique_ptr<Validator>>& validators, ValidationContext& ctx,
              EarlyStopping& stopping, const std::string& best_metric, TrainingState& state) {
  ctx.reset();
  state.metrics.clear();
  for (auto& v : validators) state.metrics[v->name()] = v->validate(ctx);
  const bool best = stopping.update(state.metrics.at(best_metric));
  state.best = stopping.best();
  state.evals_since_best = stopping.evals_since_best();
  return best;
}

bool lower_is_better(const std::vector<std::unique_ptr<Validator>>& validators,
                     const std::string& name) {
  for (const auto& v : validators)
    if (v->name() == name) return v->lower_is_better();
  throw InputError("train.best_metric: '" + name + "' is not computed by this run "
                   "(translation metrics need train.valid_bleu_sentences > 0)");
}

}  // namespace

TrainResult train(const Config& cfg, const std::string& resume_dir) {
  const TrainConfig& tc = cfg.train;
  const int64_t threads = set_threads(tc.threads);
  const c10::Device device = resolve_device(cfg.attention.device, "attention.device");
  torch::manual_seed(tc.seed);
  spdlog::info("train: device {}, {} threads, attention backend '{}'", device.str(), threads,
               cfg.attention.backend);
  const CheckpointManager checkpoints(cfg, resume_dir);
  const Tokenizer src_tok(checkpoints.src_model()), tgt_tok(checkpoints.tgt_model());
  const Data data = load_data(cfg, src_tok, tgt_tok);
  Transformer model = build_model(cfg, src_tok.vocab_size(), tgt_tok.vocab_size());
  auto validators = make_validators(tc.valid_bleu_sentences > 0);
  EarlyStopping stopping(lower_is_better(validators, tc.best_metric), tc.patience);
  TrainStep step(model, tc, device, std::make_shared<LocalSync>());
  TrainingState state = checkpoints.restore(model, step.optimizer());
  stopping.restore(state.best, state.evals_since_best);
  model->to(device);
  model->train();
  spdlog::info("model: {} parameters", parameter_count(*model));
  BatchSource source(data.train, tc.batch_tokens, tc.batch_sentences, tc.seed);
  source.seek(state.position);
  ValidationContext ctx(model, data.valid, src_tok, tgt_tok, decode_options(cfg.decode), tc.batch_tokens,
                        tc.batch_sentences, tc.valid_bleu_sentences, device);
  Reporter reporter(tc, checkpoints.resuming(), /*active=*/true);

  for (bool stop = false; !stop;) {
    const StepBatch batch = source.next();
    ++state.step;
    reporter.step(state, step.run(batch, state.step),
                  batch.global_tokens + batch.global_src_tokens, learning_rate(tc, state.step));
    state.position = source.position();
    const bool out_of_steps = tc.max_steps > 0 && state.step >= tc.max_steps;
    const bool out_of_time = tc.max_minutes > 0 && reporter.wall_minutes() >= tc.max_minutes;
    const bool out_of_epochs = tc.max_epochs > 0 && state.position.epoch >= tc.max_epochs;
    stop = out_of_steps || out_of_time || out_of_epochs;
    if (state.step % tc.eval_every != 0 && !stop) continue;
    reporter.pause_clock();
    const bool best = evaluate(validators, ctx, stopping, tc.best_metric, state);
    reporter.evaluation(state, state.metrics, best);
    checkpoints.save(model, step.optimizer(), state, best);
    reporter.resume_clock();
    if (stopping.stalled())
      reporter.info(fmt::format("train: no improvement in {} evaluations, stopping", tc.patience));
    if (out_of_time) reporter.info(fmt::format("train: time limit of {} minutes reached", tc.max_minutes));
    stop = stop || stopping.stalled();
  }
  return reporter.finish(state);
}

}  // namespace nmt
