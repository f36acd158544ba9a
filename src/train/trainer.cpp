#include "train/trainer.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>

#include "data/batch_source.h"
#include "model/build.h"
#include "tokenizer/tokenizer.h"
#include "train/op_profiler.h"
#include "train/train_step.h"
#include "train/validators.h"
#include "util/cpu_features.h"
#include "util/device.h"
#include "util/errors.h"

namespace nmt {

namespace {

ParallelCorpus load_split(const Config& cfg, const std::string& src, const std::string& tgt,
                          const Tokenizer& src_tok, const Tokenizer& tgt_tok) {
  return load_parallel(src, tgt, src_tok, tgt_tok, cfg.data.max_len);
}

// Everything a run is made of, set up (and resumed) in one place.
struct Session {
  Session(const Config& config, const std::string& resume_dir)
      : cfg(config),
        threads(set_threads(cfg.train.threads)),
        device(resolve_device(cfg.attention.device, "attention.device")),
        checkpoints(cfg, resume_dir),
        src_tok(checkpoints.src_model()),
        tgt_tok(checkpoints.tgt_model()),
        train_data(load_split(cfg, cfg.data.train_src, cfg.data.train_tgt, src_tok, tgt_tok)),
        valid_data(head(load_split(cfg, cfg.data.valid_src, cfg.data.valid_tgt, src_tok, tgt_tok),
                        cfg.train.valid_max_sentences)),
        precision(resolve_precision(cfg.train.precision, device, "train.precision")),
        model(on_device(seeded_model(cfg, src_tok.vocab_size(), tgt_tok.vocab_size()), device,
                        precision)),
        step(model, cfg.train, device, std::make_shared<LocalSync>()),
        state(checkpoints.restore(model, step.optimizer())),
        source(train_data, cfg.train.batch_tokens, cfg.train.batch_sentences, cfg.train.seed) {
    source.seek(state.position);
    model->train();
    spdlog::info("train: device {}, {} threads, attention backend '{}', matrix multiplies in {} (kernels: {})",
                 device.str(), threads, cfg.attention.backend, cfg.train.precision,
                 isa_name(kernel_isa()));
    spdlog::info("data: {} training pairs ({} skipped as longer than {}), {} validation pairs; "
                 "vocab {} / {}; model: {} parameters",
                 train_data.src.size(), train_data.skipped, cfg.data.max_len, valid_data.src.size(),
                 src_tok.vocab_size(), tgt_tok.vocab_size(), parameter_count(*model));
  }

  // Parameters are initialized from the seed and moved to the device before
  // the optimizer takes them into its flat buffer.
  static Transformer seeded_model(const Config& cfg, int64_t src_vocab, int64_t tgt_vocab) {
    torch::manual_seed(cfg.train.seed);
    return build_model(cfg, src_vocab, tgt_vocab);
  }
  static Transformer on_device(Transformer model, const c10::Device& device, at::ScalarType precision) {
    model->to(device);
    model->set_matmul_dtype(precision);
    return model;
  }

  Config cfg;
  int64_t threads;
  c10::Device device;
  at::ScalarType precision;
  CheckpointManager checkpoints;
  Tokenizer src_tok, tgt_tok;
  ParallelCorpus train_data, valid_data;
  Transformer model;
  TrainStep step;
  TrainingState state;
  BatchSource source;
};

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
  Session s(cfg, resume_dir);
  auto validators = make_validators(tc.valid_bleu_sentences > 0);
  EarlyStopping stopping(lower_is_better(validators, tc.best_metric), tc.patience);
  stopping.restore(s.state.best, s.state.evals_since_best);
  ValidationContext ctx(s.model, s.valid_data, s.src_tok, s.tgt_tok, decode_options(cfg.decode),
                        tc.batch_tokens, tc.batch_sentences, tc.valid_bleu_sentences, s.device);
  Reporter reporter(tc, s.checkpoints.resuming(), /*active=*/true);

  for (bool stop = false; !stop;) {
    const StepBatch batch = s.source.next();
    ++s.state.step;
    reporter.step(s.state, s.step.run(batch, s.state.step),
                  batch.global_tokens + batch.global_src_tokens, learning_rate(tc, s.state.step));
    s.state.position = s.source.position();
    const bool out_of_steps = tc.max_steps > 0 && s.state.step >= tc.max_steps;
    const bool out_of_time = tc.max_minutes > 0 && reporter.wall_minutes() >= tc.max_minutes;
    const bool out_of_epochs = tc.max_epochs > 0 && s.state.position.epoch >= tc.max_epochs;
    stop = out_of_steps || out_of_time || out_of_epochs;
    if (s.state.step % tc.eval_every != 0 && !stop) continue;
    reporter.pause_clock();
    const bool best = evaluate(validators, ctx, stopping, tc.best_metric, s.state);
    reporter.evaluation(s.state, s.state.metrics, best);
    s.checkpoints.save(s.model, s.step.optimizer(), s.state, best);
    reporter.resume_clock();
    if (stopping.stalled())
      reporter.info(fmt::format("train: no improvement in {} evaluations, stopping", tc.patience));
    if (out_of_time) reporter.info(fmt::format("train: time limit of {} minutes reached", tc.max_minutes));
    stop = stop || stopping.stalled();
  }
  return reporter.finish(s.state);
}

void profile_training(const Config& cfg, int64_t steps, std::ostream& out) {
  Session s(cfg, "");
  const auto run = [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const StepBatch batch = s.source.next();
      s.step.run(batch, ++s.state.step).loss.item<double>();
    }
  };
  run(5);  // warm-up: allocator, thread pools, first-call dispatch
  OpProfiler profiler;
  profiler.start();
  const auto t0 = std::chrono::steady_clock::now();
  run(steps);
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<OpTime> ops = profiler.stop();
  out << "profile of " << steps << " training steps (attention " << cfg.attention.backend << ", "
      << s.threads << " threads, matrix multiplies in " << cfg.train.precision
      << "), after 5 warm-up steps:\n"
      << format_profile(ops, steps, wall_ms, 25);
}

}  // namespace nmt
