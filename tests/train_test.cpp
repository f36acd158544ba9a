// Training (train/): the trainer's parts, each on its own (EarlyStopping and
// the validators, TrainStep, CheckpointManager, Reporter); then whole runs:
// a resumed run continues exactly, and every attention backend trains alike.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <tuple>

#include <torch/serialize.h>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/prepare.h"
#include "data/shards.h"
#include "eval/bleu.h"
#include "model/build.h"
#include "model/parameter_table.h"
#include "ops/attention/backend.h"
#include "ops/op_glue.h"
#include "support/temp_dir.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint_average.h"
#include "train/checkpoint_manager.h"
#include "train/checkpoint_writer.h"
#include "train/loss.h"
#include "train/op_profiler.h"
#include "train/recent_block_cache.h"
#include "train/reporter.h"
#include "train/scheduler.h"
#include "train/train_step.h"
#include "train/trainer.h"
#include "train/validators.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace nmt {
namespace {

TEST(EarlyStopping, KnowsWhichWayIsBetterAndWhenItHasStalled) {
  EarlyStopping loss(/*lower_is_better=*/true, /*patience=*/2);
  EXPECT_TRUE(loss.update(3.0));
  EXPECT_TRUE(loss.update(2.5));
  EXPECT_FALSE(loss.update(2.7));
  EXPECT_FALSE(loss.stalled());
  EXPECT_FALSE(loss.update(std::nan("")));  // NaN is never an improvement
  EXPECT_TRUE(loss.stalled());
  EXPECT_EQ(loss.best(), 2.5);

  EarlyStopping bleu(/*lower_is_better=*/false, /*patience=*/0);
  EXPECT_TRUE(bleu.update(10.0));
  EXPECT_FALSE(bleu.update(9.0));
  EXPECT_TRUE(bleu.update(11.0));
  for (int i = 0; i < 50; ++i) bleu.update(1.0);
  EXPECT_FALSE(bleu.stalled());  // patience 0: never

  EarlyStopping resumed(false, 3);
  resumed.restore(std::nan(""), 0);  // a run without an evaluation yet
  EXPECT_TRUE(resumed.update(0.5));
  resumed.restore(40.0, 2);
  EXPECT_FALSE(resumed.update(39.0));
  EXPECT_TRUE(resumed.stalled());
}

// Lower is better for the loss and for the count of translations that
// stopped at the length limit (runtime/length_limit.h).
TEST(Validators, LowerIsBetterForTheLossAndTheLengthLimited) {
  std::map<std::string, bool> lower;
  for (const auto& v : make_validators(true)) lower[v->name()] = v->lower_is_better();
  EXPECT_EQ(lower, (std::map<std::string, bool>{{"loss", true}, {"bleu", false}, {"chrf", false},
                                                {"exact", false}, {"length_limited", true}}));
  EXPECT_EQ(make_validators(false).size(), 1u);
}

struct TinyRun {
  std::unique_ptr<Tokenizer> zh, en;
  ParallelCorpus data;
  Transformer model{nullptr};
};

TinyRun tiny_run(int pairs) {
  TinyRun t;
  const auto& paths = testing::toy_tokenizers();
  t.zh = std::make_unique<Tokenizer>(paths.src_model);
  t.en = std::make_unique<Tokenizer>(paths.tgt_model);
  t.data = head(load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), *t.zh, *t.en, 64),
                pairs);
  torch::manual_seed(0);
  t.model = build_model(testing::tiny_config(), t.zh->vocab_size(), t.en->vocab_size());
  return t;
}

TEST(Validators, LossIsTheUnsmoothedTokenMeanAndTranslationsAreShared) {
  TinyRun t = tiny_run(30);
  ValidationContext ctx(t.model, t.data, *t.zh, *t.en, DecodeOptions{}, 200, 0, 5, torch::kCPU);
  t.model->train();
  const double loss = LossValidator().validate(ctx);
  EXPECT_TRUE(t.model->is_training());  // restored after evaluating
  t.model->eval();
  std::vector<int64_t> all(t.data.src.size());
  std::iota(all.begin(), all.end(), 0);
  const Batch b = make_batch(t.data, all);
  // The unfused composite: logits, then LibTorch's cross-entropy.
  const at::Tensor logits = t.model(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);
  const double expected = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), b.tgt_out.reshape({-1}),
                                                 {}, at::Reduction::Sum, kPadId, 0.0)
                              .item<double>() / b.tokens;
  EXPECT_NEAR(loss, expected, 1e-5);
  const auto* first = &ctx.hypotheses();
  EXPECT_EQ(ctx.hypotheses().size(), 5u);
  EXPECT_EQ(first, &ctx.hypotheses());
  EXPECT_EQ(ExactMatchValidator().validate(ctx),
            100.0 * eval::exact_match(ctx.hypotheses(), ctx.references()));
}

TrainConfig step_config() {
  TrainConfig tc;
  tc.lr = 3e-3;
  tc.warmup_steps = 1;
  tc.label_smoothing = 0.0;
  return tc;
}

// Counts the calls, to show where TrainStep synchronises.
class CountingSync final : public GradientSync {
 public:
  void before_backward() override { ++before; }
  void after_backward() override { ++after; }
  void sum(std::vector<at::Tensor>& t) override { ++sums; }
  int before = 0, after = 0, sums = 0;
};

TEST(TrainStep, LowersTheLossAndSynchronisesEveryStep) {
  TinyRun t = tiny_run(24);
  auto sync = std::make_shared<CountingSync>();
  TrainStep step(t.model, step_config(), torch::kCPU, sync);
  BatchSource source(t.data, 0, 24, 1);
  std::vector<double> losses;
  for (int i = 1; i <= 12; ++i)
    losses.push_back(step.run(source.next(), i, learning_rate(step_config(), i)).loss.item<double>());
  EXPECT_LT(losses.back(), losses.front() - 0.5);
  EXPECT_EQ(sync->before, 12);
  EXPECT_EQ(sync->after, 12);
  EXPECT_EQ(sync->sums, 12);
}

// On a GPU, the fused training ops (CUDA kernels for the layer norms, the
// feed-forward activation, the embeddings, the loss, the dense layers'
// weight gradients and Adam, and bf16 copies of the weights) against the
// LibTorch composites they replace: the same 15 steps, dropout and label
// smoothing on, in float32 and in bf16.
TEST(TrainStep, CudaFusedOpsGiveTheCompositesLossCurve) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "CUDA is not available here";
#ifndef NMT_WITH_CUDA
  GTEST_SKIP() << "this build has no CUDA kernels";
#endif
  TrainConfig tc = step_config();
  tc.label_smoothing = 0.1;
  for (const auto precision : {at::kFloat, at::kBFloat16}) {
    std::map<bool, std::vector<double>> curves;
    for (const bool fused : {false, true}) {
      ops::glue::set_cuda_fused_ops(fused);
      TinyRun t = tiny_run(24);
      Config cfg = testing::tiny_config();
      cfg.model.dropout = 0.1;
      torch::manual_seed(0);
      t.model = build_model(cfg, t.zh->vocab_size(), t.en->vocab_size());
      t.model->to(torch::kCUDA);
      t.model->set_matmul_dtype(precision);
      t.model->set_attention_backend(ops::AttentionBackend::kFlash);
      TrainStep step(t.model, tc, torch::kCUDA, std::make_shared<LocalSync>());
      t.model->train();
      BatchSource source(t.data, 0, 24, 1);
      for (int i = 1; i <= 15; ++i)
        curves[fused].push_back(step.run(source.next(), i, learning_rate(tc, i)).loss.item<double>());
    }
    ops::glue::set_cuda_fused_ops(true);
    const std::string what = precision == at::kFloat ? "float32" : "bf16";
    EXPECT_LT(curves[true].back(), curves[true].front() - 0.5) << what;  // it learns
    // float32: the same sums in other orders; bf16: other roundings (bf16
    // copies of the weights once a step, float32 weight gradients).
    const double tol = precision == at::kFloat ? 1e-4 : 3e-2;
    for (int i = 0; i < 15; ++i)
      EXPECT_NEAR(curves[true][i], curves[false][i], tol * std::max(1.0, std::abs(curves[false][i])))
          << what << " step " << i + 1;
  }
}

// One CPU step moves every parameter: each gradient, the ones autograd
// hands back (the biases the residual adds take, ops/layer_norm) and the ones
// the fused ops write into the flat buffer themselves, reaches the optimizer.
TEST(TrainStep, OneCpuStepMovesEveryParameter) {
  TinyRun t = tiny_run(6);
  TrainStep step(t.model, step_config(), torch::kCPU, std::make_shared<LocalSync>());
  t.model->train();
  std::vector<at::Tensor> before;
  for (const auto& p : t.model->parameters()) before.push_back(p.detach().clone());
  BatchSource source(t.data, 0, 6, 1);
  step.run(source.next(), 1, 1e-3);
  size_t i = 0;
  for (const auto& p : t.model->named_parameters()) EXPECT_FALSE(p.value().equal(before[i++])) << p.key();
}

TEST(TrainStep, ARankWithoutRowsContributesNothing) {
  TinyRun t = tiny_run(3);
  TrainStep step(t.model, step_config(), torch::kCPU, std::make_shared<LocalSync>());
  BatchSource source(t.data, 0, 3, 1, /*rank=*/0, /*world_size=*/5);  // 3 rows over 5 ranks: 0 for rank 0
  const StepBatch b = source.next();
  ASSERT_EQ(b.batch.src.size(0), 0);
  std::vector<at::Tensor> before;
  for (const auto& p : t.model->parameters()) before.push_back(p.detach().clone());
  const StepOutput out = step.run(b, 1, 3e-3);
  EXPECT_EQ(out.loss.item<double>(), 0.0);
  EXPECT_EQ(out.grad_norm.item<double>(), 0.0);
  size_t i = 0;
  for (const auto& p : t.model->parameters()) EXPECT_TRUE(p.equal(before[i++]));
}

// Every "when" of a run, from the config: windows, validations, the end by
// steps, epochs or minutes, and the stops a validation decides.
TEST(Scheduler, DecidesEveryWhenFromTheConfig) {
  TrainConfig tc;
  tc.log_every = 5, tc.eval_every = 20, tc.max_steps = 100, tc.max_epochs = 3, tc.max_minutes = 2;
  tc.best_metric = "bleu", tc.patience = 2, tc.stop_at_bleu = 40;
  Scheduler s(tc, /*lower_is_better=*/false, TrainingState{});
  EXPECT_TRUE(s.logs_after(10));
  EXPECT_FALSE(s.logs_after(11));
  EXPECT_TRUE(s.validates_after(40, false));
  EXPECT_FALSE(s.validates_after(41, false));
  EXPECT_TRUE(s.validates_after(41, /*last=*/true));
  TrainingState st;
  st.step = 99;
  EXPECT_FALSE(s.counts_reached(st));
  st.step = 100;
  EXPECT_TRUE(s.counts_reached(st));
  st.step = 5, st.position.epoch = 3;
  EXPECT_TRUE(s.counts_reached(st));
  EXPECT_FALSE(s.out_of_time(1.99));
  EXPECT_TRUE(s.out_of_time(2.0));
  EXPECT_DOUBLE_EQ(s.learning_rate(7, 0.5), learning_rate(tc, 7, 0.5));
  // BLEU 10, 20 (best), 15, 12: patience 2 stops at the fourth.
  EXPECT_TRUE(s.validated({{"bleu", 10}}).best);
  EXPECT_TRUE(s.validated({{"bleu", 20}}).best);
  const Scheduler::Verdict third = s.validated({{"bleu", 15}});
  EXPECT_FALSE(third.best || third.stop);
  const Scheduler::Verdict fourth = s.validated({{"bleu", 12}});
  EXPECT_TRUE(fourth.stop);
  EXPECT_NE(fourth.why.find("no improvement in 2 evaluations"), std::string::npos) << fourth.why;
  // A resumed run goes on from its record; the BLEU target stops it.
  TrainingState resumed;
  resumed.best = 20, resumed.evals_since_best = 1;
  Scheduler r(tc, false, resumed);
  EXPECT_EQ(r.evals_since_best(), 1);
  const Scheduler::Verdict reached = r.validated({{"bleu", 41}});
  EXPECT_TRUE(reached.best && reached.stop);
  EXPECT_NE(reached.why.find("reached train.stop_at_bleu 40.00"), std::string::npos) << reached.why;
  // No limits: never out of steps or time.
  st.step = 1000000, st.position.epoch = 1000;
  TrainConfig none;
  none.max_steps = 0, none.max_epochs = 0, none.max_minutes = 0;
  Scheduler unlimited(none, true, TrainingState{});
  EXPECT_FALSE(unlimited.counts_reached(st));
  EXPECT_FALSE(unlimited.out_of_time(1e9));
}

TEST(TrainStep, LearningRateWarmsUpThenDecays) {
  TrainConfig t;
  t.lr = 1e-3;
  t.warmup_steps = 100;
  EXPECT_NEAR(learning_rate(t, 1), 1e-5, 1e-12);
  EXPECT_NEAR(learning_rate(t, 100), 1e-3, 1e-12);
  EXPECT_NEAR(learning_rate(t, 400), 5e-4, 1e-12);
  t.min_lr = 6e-4;  // inverse_sqrt's floor
  EXPECT_NEAR(learning_rate(t, 400), 6e-4, 1e-12);
}

// The budget: the larger of the step and the clock fractions, clamped; a
// resumed run's minutes include its earlier sessions', so it goes on where
// the curve was.
TEST(Schedule, ProgressIsWhicheverBudgetEndsTheRunFirst) {
  TrainConfig t;
  t.max_steps = 1000, t.max_minutes = 10;
  EXPECT_DOUBLE_EQ(budget_progress(t, 100, 5.0), 0.5);   // the clock leads
  EXPECT_DOUBLE_EQ(budget_progress(t, 800, 5.0), 0.8);   // the steps lead
  EXPECT_DOUBLE_EQ(budget_progress(t, 2000, 0.0), 1.0);  // clamped
  t.max_steps = 0;
  EXPECT_DOUBLE_EQ(budget_progress(t, 5000, 2.5), 0.25);
  t.max_minutes = 0;
  EXPECT_DOUBLE_EQ(budget_progress(t, 5000, 2.5), 0.0);  // no budget
}

// Linear and cosine: warm-up, then down to min_lr at the end of the budget,
// by steps or by the clock; warmup_share puts the warm-up's end in the same
// units, so the peak comes at that share of a slow machine's run and a fast
// one's alike.
TEST(Schedule, LinearAndCosineReachMinLrAtTheEndOfTheBudget) {
  TrainConfig t;
  t.lr = 1e-3, t.min_lr = 1e-4, t.warmup_steps = 10, t.max_steps = 110, t.max_minutes = 0;
  t.lr_schedule = "linear";
  // Steps: warm-up factor step / 10 times the decay over the whole budget.
  EXPECT_NEAR(learning_rate(t, 5), 0.5 * (1e-4 + 9e-4 * (1 - 5.0 / 110)), 1e-15);
  EXPECT_NEAR(learning_rate(t, 55), 1e-4 + 9e-4 * 0.5, 1e-15);
  EXPECT_NEAR(learning_rate(t, 110), 1e-4, 1e-15);
  EXPECT_NEAR(learning_rate(t, 500), 1e-4, 1e-15);  // past the budget: stays at min_lr
  t.lr_schedule = "cosine";
  EXPECT_NEAR(learning_rate(t, 55), 1e-4 + 9e-4 * 0.5, 1e-15);  // cos(pi / 2) = 0
  EXPECT_NEAR(learning_rate(t, 110), 1e-4, 1e-15);
  EXPECT_NEAR(learning_rate(t, 22), 1e-4 + 9e-4 * 0.5 * (1 + std::cos(3.14159265358979323846 * 0.2)), 1e-15);
  // The clock: 30 minutes, a share of 0.1 warms up for 3 of them.
  t.max_steps = 0, t.max_minutes = 30, t.warmup_share = 0.1, t.lr_schedule = "linear";
  EXPECT_NEAR(learning_rate(t, 7, 1.5), 0.5 * 1e-3, 1e-15);   // half way through the warm-up
  EXPECT_NEAR(learning_rate(t, 9000, 3.0), 1e-3, 1e-15);       // the peak, whatever the step
  EXPECT_NEAR(learning_rate(t, 9, 16.5), 1e-4 + 9e-4 * 0.5, 1e-15);  // half way down
  EXPECT_NEAR(learning_rate(t, 9, 30.0), 1e-4, 1e-15);
  // A resumed run at minute 16.5 (its earlier sessions' minutes included)
  // takes the same rate at whatever step it is.
  EXPECT_DOUBLE_EQ(learning_rate(t, 1, 16.5), learning_rate(t, 9, 16.5));
  // inverse_sqrt with a share: warm-up and decay in budget progress.
  t.lr_schedule = "inverse_sqrt", t.min_lr = 0;
  EXPECT_NEAR(learning_rate(t, 1, 12.0), 1e-3 * std::sqrt(0.1 / 0.4), 1e-15);
}

TEST(Schedule, ConfigErrorsNameTheKey) {
  const auto error_of = [](const std::string& yaml) -> std::string {
    try {
      parse_config(yaml, "t.yaml");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("train: {lr_schedule: linear, max_steps: 0, max_epochs: 3}\n")
                .find("t.yaml:1: train.lr_schedule: linear decays over the run's budget"),
            std::string::npos);
  EXPECT_NE(error_of("train: {warmup_share: 0.1, max_steps: 0, max_epochs: 3}\n").find("train.warmup_share"),
            std::string::npos);
  EXPECT_NE(error_of("train: {lr: 0.001, min_lr: 0.01}\n").find("train.min_lr: 0.01 is above train.lr 0.001"),
            std::string::npos);
  EXPECT_NE(error_of("train: {lr_schedule: step}\n").find("train.lr_schedule"), std::string::npos);
}

TEST(CheckpointManager, SavesLastAndBestAndRestoresTheFullState) {
  TinyRun t = tiny_run(24);
  Config cfg = testing::tiny_config();
  cfg.train.checkpoint_dir = testing::temp_dir("ckpt_manager");
  cfg.data.prepared_dir = testing::prepared_parent();
  cfg.data.train_src = testing::toy("train.zh");
  cfg.data.train_tgt = testing::toy("train.en");
  cfg.data.valid_src = testing::toy("valid.zh");
  cfg.data.valid_tgt = testing::toy("valid.en");
  LocalSync local;
  auto manager = std::make_unique<CheckpointManager>(cfg, RunStart{}, local);
  EXPECT_FALSE(manager->resuming());
  TrainStep step(t.model, step_config(), torch::kCPU, std::make_shared<LocalSync>());
  BatchSource source(t.data, 0, 8, 1);
  for (int i = 1; i <= 3; ++i) step.run(source.next(), i, learning_rate(step_config(), i));
  TrainingState st;
  st.step = 3;
  st.position = source.position();
  st.metrics = {{"loss", 2.5}, {"bleu", 17.25}};
  st.best = 17.25;
  st.evals_since_best = 1;
  manager->save(t.model, step.optimizer(), st, /*best=*/false);
  EXPECT_TRUE(std::filesystem::exists(cfg.train.checkpoint_dir + "/last/model.pt"));
  EXPECT_FALSE(std::filesystem::exists(cfg.train.checkpoint_dir + "/best"));
  manager->save(t.model, step.optimizer(), st, /*best=*/true);
  EXPECT_TRUE(std::filesystem::exists(cfg.train.checkpoint_dir + "/best/model.pt"));

  RunStart resume;
  resume.resume = cfg.train.checkpoint_dir;
  // One writer per run folder: a second one is refused while the first lives.
  EXPECT_THROW(CheckpointManager(cfg, resume, local), InputError);
  manager.reset();
  CheckpointManager resumed(cfg, resume, local);
  EXPECT_TRUE(resumed.resuming());
  torch::manual_seed(42);
  Transformer fresh = build_model(testing::tiny_config(), t.zh->vocab_size(), t.en->vocab_size());
  TrainStep fresh_step(fresh, step_config(), torch::kCPU, std::make_shared<LocalSync>());
  const TrainingState back = resumed.restore(fresh, fresh_step.optimizer());
  EXPECT_EQ(back.step, 3);
  EXPECT_EQ(back.position, st.position);
  EXPECT_EQ(back.metrics, st.metrics);
  EXPECT_EQ(back.best, 17.25);
  EXPECT_EQ(back.evals_since_best, 1);
  const auto a = t.model->named_parameters();
  for (const auto& p : fresh->named_parameters()) EXPECT_TRUE(p.value().equal(a[p.key()])) << p.key();
  // The optimizer continues: the next update is the same in both.
  const StepBatch next = source.next();
  step.run(next, 4, learning_rate(step_config(), 4));
  fresh_step.run(next, 4, learning_rate(step_config(), 4));
  for (const auto& p : fresh->named_parameters())
    EXPECT_TRUE(p.value().allclose(a[p.key()], 0, 1e-7)) << p.key();
}

TEST(Reporter, WritesLogWindowsAndEvaluationsToMetricsJsonl) {
  TrainConfig tc;
  tc.checkpoint_dir = testing::temp_dir("reporter");
  tc.log_every = 2;
  tc.progress = false;
  {
    Reporter r(tc, TrainingState{}, /*append=*/false, /*active=*/true);
    TrainingState st;
    for (int i = 1; i <= 4; ++i) {
      st.step = i;
      r.step(st, {at::full({}, double(i)), at::zeros({})}, 100, 1e-3, /*window_ends=*/i % 2 == 0);
    }
    r.evaluation(st, {{"loss", 1.5}, {"bleu", 20.0}}, true);
    Reporter inactive(tc, TrainingState{}, /*append=*/true, /*active=*/false);
    inactive.step(st, {at::full({}, 9.0), at::zeros({})}, 100, 1e-3, /*window_ends=*/true);
    inactive.evaluation(st, {{"loss", 9.0}}, false);
    const TrainResult result = r.finish(st);
    EXPECT_EQ(result.steps, 4);
    EXPECT_DOUBLE_EQ(result.last_train_loss, 3.5);  // mean of steps 3 and 4
  }
  std::ifstream in(tc.checkpoint_dir + "/metrics.jsonl");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("\"step\": 2, \"epoch\": 1, \"train_loss\": 1.5"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("\"train_loss\": 3.5"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("\"valid_bleu\": 20, \"valid_loss\": 1.5"), std::string::npos) << lines[2];
}

// A run resumed from step 2 of a file that a killed session had written up
// to step 4: the lines of steps 3 and 4 go (they are logged again), those of
// step 2 and before stay, and so does a line without a step.
TEST(Reporter, ResumingDropsTheLinesLoggedAfterTheStepResumedFrom) {
  const std::string text =
      "{\"step\": 1, \"train_loss\": 5}\n{\"step\": 2, \"train_loss\": 4}\n{\"step\": 2, \"valid_loss\": 4.5}\n"
      "{\"note\": 1}\n{\"step\": 3, \"train_loss\": 3}\n{\"step\": 4, \"valid_loss\": 2.5}\n";
  int64_t dropped = -1;
  EXPECT_EQ(lines_up_to_step(text, 2, &dropped),
            "{\"step\": 1, \"train_loss\": 5}\n{\"step\": 2, \"train_loss\": 4}\n{\"step\": 2, \"valid_loss\": 4.5}\n"
            "{\"note\": 1}\n");
  EXPECT_EQ(dropped, 2);
  EXPECT_EQ(lines_up_to_step(text, 4, &dropped), text);
  EXPECT_EQ(dropped, 0);
  // An unended last line is a write a crash cut short: dropped whatever its step.
  bool torn = false;
  EXPECT_EQ(lines_up_to_step("{\"step\": 12, \"x\": 1}", 9, &dropped, &torn), "");
  EXPECT_EQ(dropped, 0);
  EXPECT_TRUE(torn);
  EXPECT_EQ(lines_up_to_step(text + "{\"step\": 1, \"tr", 9, &dropped, &torn), text);
  EXPECT_TRUE(torn);
  lines_up_to_step(text, 9, &dropped, &torn);
  EXPECT_FALSE(torn);

  TrainConfig tc;
  tc.checkpoint_dir = testing::temp_dir("reporter_resume");
  tc.progress = false;
  const std::string path = tc.checkpoint_dir + "/metrics.jsonl";
  write_file_atomic(path, text + "{\"step\": 2, \"valid_lo");  // and a torn line
  TrainingState at2;
  at2.step = 2;
  {
    Reporter r(tc, at2, /*append=*/true, /*active=*/true);
    EXPECT_EQ(read_file(path, "metrics"), lines_up_to_step(text, 2, nullptr));
    // Then lines are appended to that file, not the file rewritten (a
    // rewrite at every line grows with the run): the same inode, the old
    // lines as they were, each new one after them.
    struct stat before {};
    ASSERT_EQ(::stat(path.c_str(), &before), 0);
    at2.step = 3;
    r.evaluation(at2, {{"loss", 2.0}}, /*best=*/true);
    r.stamp(at2);
    r.evaluation(at2, {{"loss", 1.5}}, /*best=*/true);
    struct stat after {};
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino) << "metrics.jsonl was replaced, not appended to";
    const std::string now = read_file(path, "metrics");
    ASSERT_EQ(now.compare(0, before.st_size, lines_up_to_step(text, 2, nullptr)), 0) << now;
    const std::string added = now.substr(before.st_size);
    EXPECT_EQ(std::count(added.begin(), added.end(), '\n'), 2) << added;
    EXPECT_EQ(added.rfind("{\"step\": 3", 0), 0u) << added;
  }
}

// ---------------------------------------------------------------- whole runs

TEST(Train, ResumeContinuesExactly) {
  const auto& paths = testing::toy_tokenizers();
  Config cfg = testing::tiny_config();
  cfg.model.dropout = 0.1;  // the random state must be restored too
  cfg.data.prepared_dir = testing::prepared_parent();
  cfg.data.train_src = testing::toy("train.zh");
  cfg.data.train_tgt = testing::toy("train.en");
  cfg.data.valid_src = testing::toy("valid.zh");
  cfg.data.valid_tgt = testing::toy("valid.en");
  cfg.train.valid_max_sentences = 40;
  cfg.train.valid_bleu_sentences = 10;
  cfg.train.batch_tokens = 600;
  cfg.train.warmup_steps = 5;
  cfg.train.threads = 2;
  cfg.train.eval_every = 1000;
  cfg.train.progress = false;
  cfg.train.max_minutes = 0;
  cfg.train.max_steps = 16;
  cfg.train.log_every = 1;  // last_train_loss is then the last step's loss
  cfg.train.checkpoint_dir = testing::temp_dir("resume_straight");
  const TrainResult straight = train(cfg);

  cfg.train.checkpoint_dir = testing::temp_dir("resume_split");
  cfg.train.max_steps = 8;
  train(cfg);
  Config resumed = resume_config(cfg.train.checkpoint_dir);
  apply_override(resumed, "train.max_steps=16");
  RunStart resume;
  resume.resume = cfg.train.checkpoint_dir;
  const TrainResult second = train(resumed, resume);
  EXPECT_EQ(second.steps, 16);
  EXPECT_NEAR(second.last_train_loss, straight.last_train_loss, 1e-6);
}

// A checkpoint's tensors, as a resume reads them: the model weights (the
// average, with one) by name, and the optimizer state's flat tensors.
std::map<std::string, at::Tensor> saved_tensors(const std::string& dir) {
  std::map<std::string, at::Tensor> out;
  const LoadedCheckpoint ck = load_checkpoint(dir, torch::kCPU, CheckpointUse::kResume);
  for (const auto& p : ck.model->named_parameters()) out["model." + p.key()] = p.value().detach().clone();
  torch::serialize::InputArchive archive;
  archive.load_from(ck.optimizer_state.data(), ck.optimizer_state.size());
  for (const char* key : {"exp_avg", "exp_avg_sq", "step", "param"}) {
    at::Tensor t;
    if (archive.try_read(key, t)) out[std::string("optimizer.") + key] = t;
  }
  return out;
}

Config whole_run_config(const std::string& name) {
  Config cfg = testing::tiny_config();
  cfg.model.dropout = 0.1;
  cfg.data.prepared_dir = testing::prepared_parent();
  cfg.data.train_src = testing::toy("train.zh");
  cfg.data.train_tgt = testing::toy("train.en");
  cfg.data.valid_src = testing::toy("valid.zh");
  cfg.data.valid_tgt = testing::toy("valid.en");
  cfg.train.valid_max_sentences = 20;
  cfg.train.valid_bleu_sentences = 0;
  cfg.train.best_metric = "loss";
  cfg.train.batch_tokens = 600;
  cfg.train.warmup_steps = 5;
  cfg.train.threads = 2;
  cfg.train.progress = false;
  cfg.train.max_minutes = 0;
  cfg.train.checkpoint_dir = testing::temp_dir(name);
  return cfg;
}

// With train.ema_decay, N steps in one run and k steps + a resume to N end
// with the same weights, average and moments, bit for bit. Training itself
// is that of a run without an average (validations on the average between
// steps included): its weights and moments are the raw ones saved beside
// the average, and its model.pt is not the averaged run's.
TEST(Train, MovingAverageResumesBitExactly) {
  Config plain_cfg = whole_run_config("ema_plain");
  plain_cfg.train.eval_every = 5;
  plain_cfg.train.max_steps = 12;
  train(plain_cfg);
  const auto plain = saved_tensors(plain_cfg.train.checkpoint_dir + "/last");
  const LoadedCheckpoint plain_ck = load_checkpoint(plain_cfg.train.checkpoint_dir, torch::kCPU);
  const ops::FlatAdam plain_flat(plain_ck.model->parameters(), ops::AdamHyper{});  // the flat layout

  for (const bool step_dependent : {false, true}) {
    const std::string what = step_dependent ? " (step-dependent)" : " (fixed decay)";
    Config cfg = plain_cfg;
    cfg.train.checkpoint_dir = testing::temp_dir(step_dependent ? "ema_straight_sd" : "ema_straight");
    cfg.train.ema_decay = 0.9;
    cfg.train.ema_step_dependent = step_dependent;
    train(cfg);
    const auto straight = saved_tensors(cfg.train.checkpoint_dir + "/last");

    cfg.train.checkpoint_dir = testing::temp_dir(step_dependent ? "ema_split_sd" : "ema_split");
    cfg.train.max_steps = 7;
    train(cfg);
    Config resumed = resume_config(cfg.train.checkpoint_dir);
    apply_override(resumed, "train.max_steps=12");
    RunStart resume;
    resume.resume = cfg.train.checkpoint_dir;
    train(resumed, resume);
    const auto split = saved_tensors(cfg.train.checkpoint_dir + "/last");

    ASSERT_EQ(straight.size(), split.size()) << what;
    ASSERT_TRUE(straight.count("optimizer.param")) << "the raw weights are saved beside the average" << what;
    for (const auto& [name, t] : straight) {
      ASSERT_TRUE(split.count(name)) << name << what;
      EXPECT_TRUE(t.equal(split.at(name))) << name << what;
    }
    EXPECT_TRUE(straight.at("optimizer.param").equal(plain_flat.flat_param())) << what;
    EXPECT_TRUE(straight.at("optimizer.exp_avg").equal(plain.at("optimizer.exp_avg"))) << what;
    double moved = 0;
    for (const auto& [name, t] : plain)
      if (name.rfind("model.", 0) == 0) moved = std::max(moved, (t - straight.at(name)).abs().max().item<double>());
    EXPECT_GT(moved, 1e-4) << "model.pt holds the average, not the weights" << what;
  }

  // Resumed with the average turned off, training goes on from the raw
  // weights: the run ends as the plain one.
  Config cfg = plain_cfg;
  cfg.train.checkpoint_dir = testing::temp_dir("ema_then_off");
  cfg.train.ema_decay = 0.9;
  cfg.train.max_steps = 7;
  train(cfg);
  Config off = resume_config(cfg.train.checkpoint_dir);
  apply_overrides(off, {"train.max_steps=12", "train.ema_decay=0"});
  RunStart resume;
  resume.resume = cfg.train.checkpoint_dir;
  train(off, resume);
  const auto continued = saved_tensors(cfg.train.checkpoint_dir + "/last");
  EXPECT_EQ(continued.count("optimizer.param"), 0u);
  for (const auto& [name, t] : plain) EXPECT_TRUE(t.equal(continued.at(name))) << name << " (average turned off)";
}

// train.keep_last N: step-STEP/ beside last/ at every save, the oldest
// beyond N removed; a folder of that name holding anything nmt did not
// write is left alone (and not counted).
TEST(Train, KeepLastKeepsTheNewestSavesOnly) {
  namespace fs = std::filesystem;
  Config cfg = whole_run_config("keep_last");
  cfg.train.eval_every = 2;
  cfg.train.max_steps = 8;
  cfg.train.keep_last = 2;
  train(cfg);
  const std::string run = cfg.train.checkpoint_dir;
  EXPECT_EQ(kept_checkpoints_in(run), (std::vector<std::string>{"step-6", "step-8"}));
  EXPECT_EQ(load_checkpoint(run + "/step-8", torch::kCPU).state.step, 8);
  EXPECT_FALSE(fs::exists(run + "/step-8/optimizer.pt"));  // for inference and averaging; resume from last/
  fs::create_directories(run + "/step-7");
  std::ofstream(run + "/step-7/notes.txt") << "mine";
  Config resumed = resume_config(run);
  apply_override(resumed, "train.max_steps=12");
  RunStart resume;
  resume.resume = run;
  train(resumed, resume);
  EXPECT_EQ(kept_checkpoints_in(run), (std::vector<std::string>{"step-7", "step-10", "step-12"}));
  EXPECT_TRUE(fs::exists(run + "/step-7/notes.txt"));
}

struct SavedModel {
  std::string dir;
  Transformer model{nullptr};
};

// A checkpoint of the tiny model built from `seed`, saved at `step`.
SavedModel save_tiny(const std::string& name, uint64_t seed, int64_t step, const Config& cfg,
                     const std::string& src_model, const std::string& tgt_model) {
  const Tokenizer zh(src_model), en(tgt_model);
  torch::manual_seed(seed);
  SavedModel s{testing::temp_dir("average_" + name) + "/ck", build_model(cfg, zh.vocab_size(), en.vocab_size())};
  TrainingState state;
  state.step = step;
  state.metrics = {{"loss", 1.0 + static_cast<double>(seed)}};
  save_checkpoint(s.dir, s.model, nullptr, state, cfg, src_model, tgt_model);
  return s;
}

// nmt average: the mean of every parameter, computed in float64 and
// rounded once; a checkpoint any command loads, with the latest input's step.
TEST(CheckpointAverage, IsTheMeanTensorByTensor) {
  const auto& tok = testing::toy_tokenizers();
  const Config cfg = testing::tiny_config();
  const SavedModel a = save_tiny("a", 1, 100, cfg, tok.src_model, tok.tgt_model);
  const SavedModel b = save_tiny("b", 2, 300, cfg, tok.src_model, tok.tgt_model);
  const SavedModel c = save_tiny("c", 3, 200, cfg, tok.src_model, tok.tgt_model);
  const std::string out = testing::temp_dir("average_out") + "/avg";
  const AverageSummary s = average_checkpoints({a.dir, b.dir, c.dir}, out, /*overwrite=*/false);
  EXPECT_EQ(s.checkpoints, 3);
  EXPECT_EQ(s.step, 300);
  const LoadedCheckpoint avg = load_checkpoint(out, torch::kCPU);
  EXPECT_EQ(avg.state.step, 300);
  EXPECT_TRUE(avg.state.metrics.empty());  // they were measured on other weights
  const auto pa = a.model->named_parameters(), pb = b.model->named_parameters(), pc = c.model->named_parameters();
  int64_t checked = 0;
  for (const auto& p : avg.model->named_parameters()) {
    const at::Tensor mean =
        ((pa[p.key()].to(at::kDouble) + pb[p.key()].to(at::kDouble) + pc[p.key()].to(at::kDouble)) / 3.0)
            .to(at::kFloat);
    EXPECT_TRUE(p.value().equal(mean)) << p.key();
    if (!pa[p.key()].equal(pb[p.key()])) EXPECT_FALSE(p.value().equal(pa[p.key()])) << p.key();
    checked += p.value().numel();
  }
  EXPECT_EQ(checked, s.parameters);
  EXPECT_EQ(read_file(out + "/src.model"), read_file(tok.src_model));
  // An existing output is kept unless --overwrite, which replaces a checkpoint.
  EXPECT_THROW(average_checkpoints({a.dir, b.dir}, out, false), InputError);
  average_checkpoints({a.dir, b.dir}, out, /*overwrite=*/true);
  EXPECT_EQ(load_checkpoint(out, torch::kCPU).state.step, 300);
}

// What cannot be averaged: one line naming the file, and no output at all.
TEST(CheckpointAverage, RefusesMismatchesInOneLineNamingTheFile) {
  const auto& tok = testing::toy_tokenizers();
  const Config cfg = testing::tiny_config();
  const SavedModel a = save_tiny("ref", 1, 10, cfg, tok.src_model, tok.tgt_model);
  Config wider = cfg;
  wider.model.ff_dim = 96;
  const SavedModel shape = save_tiny("shape", 2, 10, wider, tok.src_model, tok.tgt_model);
  Config heads = cfg;
  heads.model.heads = 2;
  const SavedModel same_shapes = save_tiny("heads", 2, 10, heads, tok.src_model, tok.tgt_model);
  const SavedModel vocab = save_tiny("vocab", 2, 10, cfg, tok.tgt_model, tok.tgt_model);
  const std::string out = testing::temp_dir("average_bad") + "/avg";
  const auto error_of = [&](const std::vector<std::string>& inputs) -> std::string {
    try {
      average_checkpoints(inputs, out, false);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{a.dir, shape.dir}, shape.dir + "/model.pt: parameter encoder_layers.0.ff1.weight has shape [32, 96], " +
                               a.dir + "/model.pt has [32, 64]"},
      {{a.dir, same_shapes.dir}, same_shapes.dir + "/config.yaml: model.heads is 2, " + a.dir + "/config.yaml has 4"},
      {{a.dir, vocab.dir}, vocab.dir + "/src.model: another vocabulary than " + a.dir + "/src.model"},
      {{a.dir}, "--checkpoints: give at least two checkpoints to average (got 1)"},
      {{a.dir, a.dir + "/none"}, a.dir + "/none: no such checkpoint folder"},
  };
  for (const auto& [inputs, message] : cases) {
    const std::string e = error_of(inputs);
    EXPECT_EQ(e.rfind(message, 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_FALSE(std::filesystem::exists(out)) << e;
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp")) << e;
  }
}

// train.init_from: a new run starts from a trained checkpoint's weights and
// tokenizers. The source is a tie_all model on one shared vocabulary (its
// training, checkpoint and reload are covered on the way: the checkpoint
// holds the one matrix). The fine-tuning run, on another corpus and data
// order, encodes that corpus with the source's tokenizers, and its first
// step's loss is the source model's loss on the same batch; a run without
// init_from starts far above it.
TEST(Train, InitFromStartsFromTheGivenWeights) {
  Config cfg = whole_run_config("init_source");
  cfg.model.dropout = testing::tiny_config().model.dropout;
  cfg.tokenizer.shared = true;
  cfg.model.tie_all = true;
  cfg.data.prepared_dir = testing::shared_prepared_parent();
  cfg.train.eval_every = 1000;
  cfg.train.max_steps = 30;
  cfg.train.log_every = 1;  // last_train_loss is then the last step's loss
  train(cfg);
  const LoadedCheckpoint source = load_checkpoint(cfg.train.checkpoint_dir, torch::kCPU);
  EXPECT_TRUE(source.model->named_parameters().contains("shared_embed.weight"));
  EXPECT_EQ(source.src_model, source.tgt_model);

  Config fine = cfg;
  fine.train.init_from = cfg.train.checkpoint_dir;
  fine.data.train_src = testing::toy("valid.zh");
  fine.data.train_tgt = testing::toy("valid.en");
  fine.train.seed = 7;
  fine.train.max_steps = 1;
  fine.train.checkpoint_dir = testing::temp_dir("init_fine");
  const TrainResult tuned = train(fine);
  EXPECT_EQ(tuned.steps, 1);  // a fresh schedule: its own step 1
  const std::string corpus_dir = data::prepared_dir_for(fine);
  EXPECT_EQ(testing::slurp(corpus_dir + "/src.model"), source.src_model);
  EXPECT_EQ(testing::slurp(fine.train.checkpoint_dir + "/last/tgt.model"), source.tgt_model);

  // The source model on the fine-tuning run's first batch.
  const data::PreparedCorpus corpus(corpus_dir, source.src_tok->vocab_size(), source.tgt_tok->vocab_size());
  BatchSource batches(corpus, fine.train.batch_tokens, fine.train.batch_sentences, fine.train.seed);
  const StepBatch first = batches.next();
  Transformer model = source.model;
  const double want = token_loss_sum(model, first.batch, fine.train.label_smoothing).item<double>() /
                      static_cast<double>(first.global_tokens);
  EXPECT_NEAR(tuned.last_train_loss, want, 1e-5);

  Config fresh = fine;
  fresh.train.init_from = "";
  fresh.train.checkpoint_dir = testing::temp_dir("init_fresh");
  EXPECT_GT(train(fresh).last_train_loss, want + 1.0);
}


// The three backends are interchangeable in training: 20 Adam steps from the
// same initialization give the same loss curve.
TEST(Training, SameLossCurveWithEveryBackend) {
  const auto& paths = testing::toy_tokenizers();
  const Tokenizer zh(paths.src_model), en(paths.tgt_model);
  const ParallelCorpus all = load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), zh, en, 64);
  std::vector<int64_t> idx(24);
  std::iota(idx.begin(), idx.end(), 0);
  const Batch b = make_batch(all, idx);  // padded source and target: masks matter
  std::map<std::string, std::vector<double>> curves;
  for (const auto backend : {ops::AttentionBackend::kTorch, ops::AttentionBackend::kNaive,
                             ops::AttentionBackend::kFlash}) {
    torch::manual_seed(0);
    Transformer m = build_model(testing::tiny_config(), zh.vocab_size(), en.vocab_size());
    m->set_attention_backend(backend);
    curves[ops::backend_name(backend)] = testing::train_steps(m, b, 20, 2e-3);
  }
  EXPECT_LT(curves["torch"].back(), curves["torch"].front() - 0.5);  // it does learn
  for (const char* name : {"naive", "flash"})
    for (int step = 0; step < 20; ++step)
      EXPECT_NEAR(curves[name][step], curves["torch"][step], 1e-4) << name << " step " << step;
}


// The roofline account's matrix multiplies: each shape with its calls and
// FLOPs, from the profiler's input shapes (addmm's bias and scalars skipped,
// bmm's batch kept); ops sorted into their classes by name.
TEST(OpProfiler, CountsMatrixMultipliesByShape) {
  torch::NoGradGuard no_grad;
  const at::Tensor a = at::randn({64, 128}), b = at::randn({128, 256}), bias = at::randn({256});
  const at::Tensor x = at::randn({4, 8, 16}), y = at::randn({4, 16, 32});
  OpProfiler profiler;
  profiler.start();
  for (int i = 0; i < 3; ++i) at::mm(a, b);
  at::addmm(bias, a, b);
  at::bmm(x, y);
  at::Tensor square = at::zeros({64, 64});
  square.addmm_(at::randn({64, 32}), at::randn({32, 64}));  // the output added to is not a factor
  const std::vector<OpTime> ops = profiler.stop();
  std::map<std::string, GemmTime> by_op;
  for (const GemmTime& g : profiler.gemms()) by_op[g.op] = g;
  ASSERT_EQ(by_op.size(), 4u);
  const GemmTime& inplace = by_op.at("aten::addmm_");
  EXPECT_EQ(std::make_tuple(inplace.m, inplace.k, inplace.n), std::make_tuple(64, 32, 64));
  const GemmTime& mm = by_op.at("aten::mm");
  EXPECT_EQ(std::make_tuple(mm.batch, mm.m, mm.k, mm.n, mm.calls), std::make_tuple(1, 64, 128, 256, 3));
  EXPECT_DOUBLE_EQ(mm.flops(), 3 * 2.0 * 64 * 128 * 256);
  const GemmTime& addmm = by_op.at("aten::addmm");
  EXPECT_EQ(std::make_tuple(addmm.m, addmm.k, addmm.n, addmm.calls), std::make_tuple(64, 128, 256, 1));
  const GemmTime& bmm = by_op.at("aten::bmm");
  EXPECT_EQ(std::make_tuple(bmm.batch, bmm.m, bmm.k, bmm.n), std::make_tuple(4, 8, 16, 32));
  EXPECT_DOUBLE_EQ(bmm.flops(), 2.0 * 4 * 8 * 16 * 32);

  EXPECT_EQ(op_class("aten::mm"), "matrix multiplies");
  EXPECT_EQ(op_class("torch::autograd::CppNode<nmt::ops::(anonymous namespace)::PackedAttentionFunction<1>>"),
            "attention");
  EXPECT_EQ(op_class("nmt::add_layer_norm"), "layer norm");
  EXPECT_EQ(op_class("nmt::linear_cross_entropy"), "softmax / cross-entropy");
  EXPECT_EQ(op_class("nmt::adam_step"), "optimizer");
  EXPECT_EQ(op_class("AddmmBackward0"), "autograd");
  EXPECT_EQ(op_class("aten::copy_"), "copies and casts");

  const std::string report = format_roofline(ops, profiler.gemms(), 1, 10.0, 10.0, false);
  EXPECT_NE(report.find("64x128 . 128x256"), std::string::npos) << report;
  EXPECT_NE(report.find("4 x 8x16 . 16x32"), std::string::npos) << report;
  EXPECT_NE(report.find("of its GEMM roofline"), std::string::npos) << report;
  EXPECT_NE(report.find("the cores' arithmetic peak: "), std::string::npos) << report;
}

// The GEMMs' and the step's share of the cores' arithmetic peak: 100 GFLOP
// a step in 1 s is 100 GFLOP/s, half of a 200 GFLOP/s peak; at the peak they
// would take 0.5 s of a 2 s step, a quarter. Over the peak (products on
// wider vectors than nmt's lowered kernels): said why. No peak (bf16 without
// AVX512-BF16): said so, no shares.
TEST(OpProfiler, SharesOfTheArithmeticPeak) {
  const std::string report = format_arithmetic_peak(100e9, 1000.0, 2000.0, false, 200.0, 2);
  EXPECT_NE(report.find("the cores' arithmetic peak: 200.0 GFLOP/s"), std::string::npos) << report;
  EXPECT_NE(report.find("2 threads"), std::string::npos) << report;
  EXPECT_NE(report.find("the GEMMs at 50% of it (100.0 GFLOP/s); the step at 25% of it (its 100.00 GFLOP at the "
                        "peak take 500.00 ms of its 2000.00)"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("over 100%"), std::string::npos) << report;
  // Products faster than the peak ran on wider vectors than nmt's kernels (NMT_CPU_ISA alone): said so.
  const std::string over = format_arithmetic_peak(300e9, 1000.0, 2000.0, false, 200.0, 2);
  EXPECT_NE(over.find("the GEMMs at 150% of it"), std::string::npos) << over;
  EXPECT_NE(over.find("(over 100%: the products ran wider instructions than nmt's kernels"), std::string::npos)
      << over;
  const std::string none = format_arithmetic_peak(100e9, 1000.0, 2000.0, true, 0.0, 2);
  EXPECT_NE(none.find("not measured (vdpbf16ps bf16 dot products need AVX512-BF16"), std::string::npos) << none;
  EXPECT_EQ(none.find("the GEMMs at"), std::string::npos) << none;
}

}  // namespace
}  // namespace nmt

// The training allocator: sizes from 256 KB up rounded to at most 1/8
// more, and a tensor gets the block of its class freed last (still in the
// caches), up to as many cached bytes as were in use at once.
TEST(RecentBlockCache, HandsOutTheBlockFreedLast) {
  EXPECT_EQ(nmt::recent_block_class(1000), 1000);
  for (int64_t bytes : {int64_t{256} << 10, (int64_t{256} << 10) + 1, int64_t{4456448}, int64_t{5000001},
                        int64_t{1} << 30}) {
    const int64_t cls = nmt::recent_block_class(bytes);
    EXPECT_GE(cls, bytes);
    EXPECT_LE(static_cast<double>(cls), bytes * (1 + 1.0 / 8)) << bytes;
    EXPECT_EQ(nmt::recent_block_class(cls), cls) << "a class is its own class";
  }
  nmt::use_recent_block_cache();
  const auto floats = [](int64_t bytes) { return at::empty({bytes / 4}); };
  const nmt::RecentBlockCacheStats before = nmt::recent_block_cache_stats();
  at::Tensor a = floats(int64_t{2} << 20), b = floats(int64_t{2} << 20);  // one class
  a.fill_(1);
  const void* a_data = a.data_ptr();
  const void* b_data = b.data_ptr();
  ASSERT_NE(a_data, b_data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a_data) % 64, 0u);
  a.reset();  // freed first
  b.reset();  // freed last
  at::Tensor c = floats((int64_t{2} << 20) - 4096);  // a smaller request of the same class
  EXPECT_EQ(c.data_ptr(), b_data) << "not the block freed last";
  at::Tensor d = floats(int64_t{2} << 20);
  EXPECT_EQ(d.data_ptr(), a_data);
  const nmt::RecentBlockCacheStats after = nmt::recent_block_cache_stats();
  EXPECT_EQ(after.reused - before.reused, 2);
  EXPECT_EQ(after.fresh - before.fresh, 2);
  // A block of a class never freed comes fresh; small tensors pass through.
  at::Tensor e = floats(int64_t{3} << 20);
  EXPECT_EQ(nmt::recent_block_cache_stats().fresh - after.fresh, 1);
  at::Tensor small = at::ones({100});
  EXPECT_EQ(small.sum().item<float>(), 100.0f);
  // A class with no block freed takes one of the next two classes up, in the
  // class's own stack again when freed; three classes up is too large.
  const int64_t six_mb = int64_t{6} << 20, step = int64_t{512} << 10;  // classes of [4 MB, 8 MB): 512 KB apart
  ASSERT_EQ(nmt::recent_block_class(six_mb + step), six_mb + step);
  at::Tensor f = floats(six_mb + 2 * step);
  const void* f_data = f.data_ptr();
  f.reset();
  at::Tensor g = floats(six_mb - step);  // three classes below f's: not f's block
  EXPECT_NE(g.data_ptr(), f_data);
  at::Tensor h = floats(six_mb);  // two classes below
  EXPECT_EQ(h.data_ptr(), f_data) << "not the block of a class two up";
  h.reset();
  at::Tensor i = floats(six_mb + 2 * step);  // f's own class: the block went back to its stack
  EXPECT_EQ(i.data_ptr(), f_data);
  g.reset(), i.reset();
  c.reset(), d.reset(), e.reset();
  const nmt::RecentBlockCacheStats held = nmt::recent_block_cache_stats();
  EXPECT_LE(held.cached_bytes, held.peak_bytes) << "the cache holds no more than was ever in use at once";
  EXPECT_GE(held.cached_bytes, nmt::recent_block_class(int64_t{3} << 20));
}
