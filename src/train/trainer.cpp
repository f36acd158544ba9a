#include "train/trainer.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <vector>

#include "data/batch_source.h"
#include "data/shards.h"
#include "runtime/length_limit.h"
#include "model/build.h"
#include "ops/linear/cpu/float_gemm.h"
#include "tokenizer/tokenizer.h"
#include "train/distributed.h"
#include "train/op_profiler.h"
#include "train/scheduler.h"
#include "train/train_step.h"
#include "train/validators.h"
#include "util/cpu_features.h"
#include "util/thread_env.h"
#include "util/device.h"
#include "util/device_choices.h"
#include "util/errors.h"
#include "util/interrupt.h"
#include "util/test_hooks.h"

namespace nmt {

namespace {

// One process: no synchronisation; several (WORLD_SIZE > 1): c10d.
std::shared_ptr<GradientSync> make_sync(const DistributedEnv& env, const c10::Device& device) {
  if (!env.active()) return std::make_shared<LocalSync>();
  // Only rank 0 speaks; the others report warnings and errors.
  if (env.rank != 0) spdlog::set_level(spdlog::level::warn);
  return std::make_shared<C10dGradientSync>(env, device);
}

ParallelCorpus load_split(const Config& cfg, const std::string& src, const std::string& tgt,
                          const Tokenizer& src_tok, const Tokenizer& tgt_tok) {
  return load_parallel(src, tgt, src_tok, tgt_tok, cfg.data.max_len, cfg.tokenizer.protect_placeholders);
}

Transformer seeded_model(const Config& cfg, int64_t src_vocab, int64_t tgt_vocab) {
  torch::manual_seed(cfg.train.seed);
  return build_model(cfg, src_vocab, tgt_vocab);
}

// Parameters are initialized from the seed and moved to the device before
// the optimizer takes them into its flat buffer.
Transformer on_device(Transformer model, const c10::Device& device, at::ScalarType precision) {
  model->to(device);
  model->set_matmul_dtype(precision);
  return model;
}

// Every save records the ratio of the corpus the run trains on, a resumed
// run's too (its checkpoint may predate the record).
// Validation decodes greedily whatever decode.beam says: its BLEU is a proxy
// that picks best/, and greedy is the cheapest one that tracks beam search.
DecodeOptions validation_options(const Config& cfg, const Tokenizer& target, double corpus_ratio) {
  DecodeOptions o = decode_options(cfg.decode, cfg.tokenizer.protect_placeholders, &target, corpus_ratio);
  o.beam = 0;
  return o;
}

// What every save records about the run besides its progress: the corpus's
// ratio, and the precision its products compute in (a resumed run with
// precision auto keeps it).
TrainingState with_run_record(TrainingState state, double ratio, at::ScalarType precision) {
  state.target_source_ratio = ratio;
  state.precision = precision_name(precision);
  return state;
}

RunStart with_restarts(RunStart start, const DistributedEnv& env) {
  start.restart = env.restart_count;
  return start;
}

// Everything a run is made of, set up (and resumed) in one place.
struct TrainingSession {
  TrainingSession(const Config& config, const RunStart& start)
      : cfg(config),
        env(distributed_env_from_environment()),
        threads(set_threads(cfg.train.threads)),
        device(resolve_device(cfg.attention.device, "attention.device")),
        sync(make_sync(env, device)),
        checkpoints(cfg, with_restarts(start, env), *sync),
        precision(run_precision()),
        src_tok(checkpoints.src_model()),
        tgt_tok(checkpoints.tgt_model()),
        train_data(checkpoints.corpus_dir(), src_tok.vocab_size(), tgt_tok.vocab_size()),
        valid_data(head(load_split(cfg, cfg.data.valid_src, cfg.data.valid_tgt, src_tok, tgt_tok),
                        cfg.train.valid_max_sentences)),
        model(on_device(seeded_model(cfg, src_tok.vocab_size(), tgt_tok.vocab_size()), device,
                        precision)),
        step(model, cfg.train, device, sync),
        state(with_run_record(checkpoints.restore(model, step.optimizer()), checkpoints.corpus_ratio(), precision)),
        source(train_data, cfg.train.batch_tokens, cfg.train.batch_sentences, cfg.train.seed,
               env.rank, env.world_size) {
    step.broadcast_state();
    source.seek(state.position);
    batches = std::make_unique<PrefetchingSource>(source);
    model->train();
    // Where the products run: oneDNN's, MKL's or nmt's gemm on OpenMP's threads
    // (dense() and the cross-entropy), or LibTorch's BLAS.
    std::string blas;
    if (device.is_cpu()) ops::cpu::float_gemm_choice();  // a bad NMT_CPU_GEMM stops a bf16 run too
    const bool bf16 = precision == at::kBFloat16;
    if (device.is_cpu() && (bf16 ? ops::cpu::bf16_gemm_available() : ops::cpu::float_gemm_available())) {
      const char* policy = std::getenv("OMP_WAIT_POLICY");
      blas = "products on " + (bf16 ? ops::cpu::bf16_gemm_description() : ops::cpu::float_gemm_description()) +
             ", OpenMP threads " +
             (policy ? "OMP_WAIT_POLICY=" + std::string(policy) : std::string("spinning a while between ops"));
    } else if (device.is_cpu()) {
      blas = blas_kernels();
    }
    // precision auto's measurement, said with its outcome.
    const std::string measured =
        kept_precision     ? " (precision auto: as the run it resumes trained)"
        : bf16_speedup > 0 ? fmt::format(" (precision auto: a bf16 product ran {:.2f}x as fast as float32 here; bf16 "
                                         "from {:.2f}x)",
                                         bf16_speedup, kBf16TrainingPays)
                           : "";
    spdlog::info("train: device {}, {} threads{}, attention backend '{}', matrix multiplies in {}{} (kernels: {}{})",
                 device.str(), threads,
                 env.active() ? fmt::format(" per rank, {} ranks", env.world_size) : "",
                 ops::backend_name(cfg.attention.backend), precision_name(precision), measured,
                 isa_name(kernel_isa()), blas.empty() ? "" : "; " + blas);
    spdlog::info("data: {} training pairs in {} shard(s) of {}, {} validation pairs; vocab {} / {}; model: {} "
                 "parameters",
                 train_data.size(), train_data.shards(), train_data.dir(), valid_data.src.size(),
                 src_tok.vocab_size(), tgt_tok.vocab_size(), parameter_count(*model));
  }

  bool leader() const { return env.rank == 0; }

  // train.precision, resolved: auto keeps what the run it resumes trained in
  // (state.yaml records it; util/device.h says when). Ranks of a group take
  // bf16 without measuring, as a new group does.
  at::ScalarType run_precision() {
    const std::string kept = env.active() ? "" : checkpoints.resumed_precision();
    const at::ScalarType p =
        resolve_precision(cfg.train.precision, device, "train.precision", auto_precision_probe(), kept);
    kept_precision = !kept.empty() && kept == precision_name(p) &&
                     cfg.train.precision == Precision::kAuto;
    return p;
  }

  // precision auto on a CPU: one product of the model's feed-forward shape
  // timed in bf16 and float32. Ranks of a group take bf16 without measuring
  // (their choices must agree, and a measurement may differ between hosts).
  std::function<double()> auto_precision_probe() {
    if (env.active()) return {};
    return [this] {
      return bf16_speedup = bf16_product_speedup(2048, cfg.model.d_model, cfg.model.ff_dim);
    };
  }

  Config cfg;
  DistributedEnv env;
  int64_t threads;
  c10::Device device;
  double bf16_speedup = 0;      // measured for precision auto (0: not measured)
  bool kept_precision = false;  // precision auto took the resumed run's
  std::shared_ptr<GradientSync> sync;
  CheckpointManager checkpoints;
  at::ScalarType precision;  // after checkpoints: auto keeps a resumed run's
  Tokenizer src_tok, tgt_tok;
  data::PreparedCorpus train_data;
  ParallelCorpus valid_data;
  Transformer model;
  TrainStep step;
  TrainingState state;
  BatchSource source;
  std::unique_ptr<PrefetchingSource> batches;  // the source's batches, assembled ahead of the step
};

bool lower_is_better(const std::vector<std::unique_ptr<Validator>>& validators,
                     const std::string& name) {
  for (const auto& v : validators)
    if (v->name() == name) return v->lower_is_better();
  throw InputError("train.best_metric: '" + name + "' is not computed by this run "
                   "(translation metrics need train.valid_bleu_sentences > 0)");
}

// Validation and checkpoints, on rank 0 (the others wait for it there).
class Evaluation {
 public:
  enum Outcome { kContinue = 0, kInterrupted = 2, kFinished = 3 };

  Evaluation(TrainingSession& s, Reporter& reporter)
      : s_(s),
        reporter_(reporter),
        validators_(make_validators(s.cfg.train.valid_bleu_sentences > 0)),
        ctx_(s.model, s.valid_data, s.src_tok, s.tgt_tok, validation_options(s.cfg, s.tgt_tok, s.state.target_source_ratio),
             s.cfg.train.batch_tokens, s.cfg.train.batch_sentences, s.cfg.train.valid_bleu_sentences,
             s.device) {
    if (s.leader() && s.cfg.train.valid_bleu_sentences > 0)
      reporter_.info("valid: translations' length limit: " +
                     describe_length_limit(ctx_.decode(), s.model->options().max_positions()));
  }

  // The direction of train.best_metric among this run's validators, for the
  // Scheduler's early stopping.
  bool lower_is_better() const { return nmt::lower_is_better(validators_, s_.cfg.train.best_metric); }

  // Evaluates, saves last/ (and best/), and asks the scheduler whether the
  // run goes on. An interrupt during validation skips the rest of it: last/
  // is saved with the previous metrics. With train.ema_decay the weights
  // validated and saved as the model are the average.
  Outcome run(Scheduler& scheduler) {
    Outcome outcome = kContinue;
    if (s_.leader()) {
      reporter_.pause_clock();
      TrainingState candidate = s_.state;
      try {
        const ops::AveragedWeights averaged(s_.step.optimizer());
        ctx_.reset();
        candidate.metrics.clear();
        for (auto& v : validators_) candidate.metrics[v->name()] = v->validate(ctx_);
        const Scheduler::Verdict verdict = scheduler.validated(candidate.metrics);
        candidate.best = scheduler.best();
        candidate.evals_since_best = scheduler.evals_since_best();
        s_.state = candidate;
        reporter_.evaluation(s_.state, s_.state.metrics, verdict.best);
        if (s_.cfg.train.valid_bleu_sentences > 0 && !ctx_.length_limited().empty())
          reporter_.warn(fmt::format("valid: {} of {} translations stopped at the length limit ({}) before "
                                     "ending: an early model's babble, or translations cut short "
                                     "(decode.max_len_factor)",
                                     ctx_.length_limited().size(), ctx_.hypotheses().size(),
                                     describe_length_limit(ctx_.decode(), s_.model->options().max_positions(), false)));
        reporter_.stamp(s_.state);
        s_.checkpoints.save(s_.model, s_.step.optimizer(), s_.state, verdict.best);
        if (verdict.stop) {
          outcome = kFinished;
          reporter_.info(verdict.why);
        }
      } catch (const Interrupted&) {
        outcome = save_interrupted();
      }
      reporter_.resume_clock();
    }
    return share(outcome);
  }

  // After an interrupt: last/ with the state as it is, and how to go on.
  Outcome save_interrupted() {
    if (s_.leader()) {
      reporter_.stamp(s_.state);
      const ops::AveragedWeights averaged(s_.step.optimizer());
      s_.checkpoints.save(s_.model, s_.step.optimizer(), s_.state, /*best=*/false);
      reporter_.info(fmt::format("train: stopped at step {} (epoch {}, batch {}); {}/last saved; "
                                 "continue with: nmt train --resume {}",
                                 s_.state.step, s_.state.position.epoch + 1, s_.state.position.batch,
                                 s_.checkpoints.run_dir(), s_.checkpoints.run_dir()));
    }
    return share(kInterrupted);
  }

 private:
  // Rank 0's outcome, on every rank.
  Outcome share(Outcome o) {
    return static_cast<Outcome>(
        std::stoi(s_.sync->set_and_wait("evaluated/" + std::to_string(s_.state.step), std::to_string(o))));
  }

  TrainingSession& s_;
  Reporter& reporter_;
  std::vector<std::unique_ptr<Validator>> validators_;
  ValidationContext ctx_;
};

// A non-finite gradient: skipped (and said) while train.skip_nonfinite_steps
// allows, then the run stops; checkpoints saved before stay as they were.
void check_update(const StepOutput& out, int64_t step, int64_t& skipped, const TrainConfig& tc,
                  Reporter& reporter) {
  if (out.updated) return;
  if (++skipped > tc.skip_nonfinite_steps)
    throw std::runtime_error(fmt::format(
        "training diverged: the gradient at step {} is not finite (skipped so far: {}, allowed by "
        "train.skip_nonfinite_steps: {}); the checkpoints saved before are intact",
        step, skipped - 1, tc.skip_nonfinite_steps));
  reporter.info(fmt::format("train: step {}: gradient not finite, update skipped ({} of at most {})",
                            step, skipped, tc.skip_nonfinite_steps));
}

}  // namespace

TrainResult train(const Config& cfg, const RunStart& start) {
  const TrainConfig& tc = cfg.train;
  TrainingSession s(cfg, start);
  Reporter reporter(tc, s.state, s.checkpoints.resuming(), /*active=*/s.leader());
  Evaluation evaluation(s, reporter);
  Scheduler scheduler(tc, evaluation.lower_is_better(), s.state);
  int64_t skipped = 0;
  Evaluation::Outcome outcome = Evaluation::kContinue;
  if (scheduler.counts_reached(s.state)) {  // resuming a run that had finished
    reporter.info(fmt::format("train: nothing to do: the run is at step {}, epoch {} (train.max_steps {}, "
                              "train.max_epochs {})", s.state.step, s.state.position.epoch, tc.max_steps,
                              tc.max_epochs));
    outcome = Evaluation::kFinished;
  }
  // The clock the learning rate reads (a schedule over max_minutes): rank 0's
  // wall minutes, so that every rank takes the same rate. Shared once here,
  // then with each step's votes (the other ranks add 0).
  double schedule_minutes = std::stod(s.sync->set_and_wait(
      "schedule-minutes/" + std::to_string(s.state.step), std::to_string(reporter.wall_minutes())));
  while (outcome == Evaluation::kContinue) {
    const StepBatch batch = s.batches->next();
    ++s.state.step;
    test_crash_at(s.env.rank, s.state.step, s.env.restart_count);
    const bool out_of_time = scheduler.out_of_time(reporter.wall_minutes());
    const double lr = scheduler.learning_rate(s.state.step, schedule_minutes);
    // Votes every rank takes part in: [time is up, a signal came, rank 0's clock].
    const StepOutput out = s.step.run(batch, s.state.step, lr,
                                      {out_of_time ? 1.0 : 0.0, interrupted() ? 1.0 : 0.0,
                                       s.leader() ? reporter.wall_minutes() : 0.0});
    schedule_minutes = out.votes[2];
    check_update(out, s.state.step, skipped, tc, reporter);
    reporter.step(s.state, out, batch.global_tokens + batch.global_src_tokens, lr,
                  scheduler.logs_after(s.state.step));
    test_hold("train-step", /*until_signal=*/true);
    s.state.position = batch.next;
    if (out.votes[1] > 0) {
      outcome = evaluation.save_interrupted();
      break;
    }
    const bool timed_out = out.votes[0] > 0;
    const bool done = timed_out || scheduler.counts_reached(s.state);
    if (!scheduler.validates_after(s.state.step, done)) continue;
    if (timed_out) reporter.info(fmt::format("train: time limit of {} minutes reached", tc.max_minutes));
    outcome = evaluation.run(scheduler);
    if (done && outcome == Evaluation::kContinue) outcome = Evaluation::kFinished;
  }
  s.sync->finish();
  TrainResult result = reporter.finish(s.state, {s.batches->waited_seconds(), s.sync->stats(), s.env.active()});
  // A rank stopped by another rank's signal exits as interrupted too.
  if (outcome == Evaluation::kInterrupted) result.interrupted = interrupted() ? interrupt_signal() : SIGINT;
  return result;
}

void profile_training(const Config& cfg, int64_t steps, std::ostream& out, RunStart start) {
  start.profile = true;
  TrainingSession s(cfg, start);
  // Runs steps on the given batches; returns their tokens (source and target, as the progress line counts them).
  const auto run = [&](const std::vector<StepBatch>& batches) {
    int64_t tokens = 0;
    for (const StepBatch& batch : batches) {
      ++s.state.step;
      s.step.run(batch, s.state.step, learning_rate(cfg.train, s.state.step, 0.0)).loss.item<double>();
      tokens += batch.global_tokens + batch.global_src_tokens;
    }
    return tokens;
  };
  const auto next_batches = [&](int64_t n) {
    std::vector<StepBatch> batches;
    for (int64_t i = 0; i < n; ++i) batches.push_back(s.batches->next());
    return batches;
  };
  const auto ms_since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  run(next_batches(5));  // warm-up: allocator, thread pools, first-call dispatch
  // The same batches without the profiler first: what a step costs when
  // nothing records it (on a GPU the profiler's own overhead is large beside
  // a step that is mostly kernel launches). The same batches, since a
  // batch's shapes set its time: the next ones ran up to 26% longer or
  // shorter a step (configs/real.yaml), which skewed the step's share of its
  // GEMM roofline below.
  const std::vector<StepBatch> batches = next_batches(steps);
  auto t0 = std::chrono::steady_clock::now();
  const int64_t plain_tokens = run(batches);
  const double plain_ms = ms_since(t0);
  OpProfiler profiler;
  profiler.start();
  t0 = std::chrono::steady_clock::now();
  const int64_t profiled_tokens = run(batches);
  const double wall_ms = ms_since(t0);
  const std::vector<OpTime> ops = profiler.stop();
  if (!s.leader()) return;
  const bool bf16 = s.precision == at::kBFloat16;
  out << "profile of " << steps << " training steps (attention " << ops::backend_name(cfg.attention.backend) << ", "
      << s.threads << " threads, matrix multiplies in " << precision_name(s.precision)
      << ", device " << s.device.str() << "), after 5 warm-up steps:\n"
      << fmt::format("without the profiler: {:.2f} ms a step, {:.0f} tokens/s over {} batches ({} tokens)\n",
                     plain_ms / static_cast<double>(steps), 1e3 * static_cast<double>(plain_tokens) / plain_ms,
                     steps, plain_tokens)
      << fmt::format("with the profiler: {:.2f} ms a step over the same batches ({} tokens)\n",
                     wall_ms / static_cast<double>(steps), profiled_tokens)
      << format_profile(ops, steps, wall_ms, 25);
  // The roofline account times each GEMM shape alone on this machine: the CPU's (a GPU's
  // kernels run asynchronously to the profiler's CPU clock).
  if (s.device.is_cpu()) out << format_roofline(ops, profiler.gemms(), steps, wall_ms, plain_ms, bf16);
}

}  // namespace nmt
