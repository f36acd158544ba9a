// Training (train/): the trainer's parts, each on its own (EarlyStopping and
// the validators, TrainStep, CheckpointManager, Reporter); then whole runs:
// a resumed run continues exactly, and every attention backend trains alike.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/prepare.h"
#include "data/shards.h"
#include "eval/bleu.h"
#include "model/build.h"
#include "ops/attention/backend.h"
#include "ops/op_glue.h"
#include "support/temp_dir.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint_manager.h"
#include "train/loss.h"
#include "train/reporter.h"
#include "train/scheduler.h"
#include "train/train_step.h"
#include "train/trainer.h"
#include "train/validators.h"
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

TEST(Validators, LowerIsBetterOnlyForTheLoss) {
  std::map<std::string, bool> lower;
  for (const auto& v : make_validators(true)) lower[v->name()] = v->lower_is_better();
  EXPECT_EQ(lower, (std::map<std::string, bool>{{"loss", true}, {"bleu", false}, {"chrf", false},
                                                {"exact", false}}));
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
  EXPECT_DOUBLE_EQ(s.learning_rate(7), learning_rate(tc, 7));
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


// train.init_from: a new run starts from a trained checkpoint's weights and
// tokenizers. The source is a tie_all model on one shared vocabulary (its
// training, checkpoint and reload are covered on the way: the checkpoint
// holds the one matrix). The fine-tuning run, on another corpus and data
// order, encodes that corpus with the source's tokenizers, and its first
// step's loss is the source model's loss on the same batch; a run without
// init_from starts far above it.
TEST(Train, InitFromStartsFromTheGivenWeights) {
  Config cfg = testing::tiny_config();
  cfg.tokenizer.shared = true;
  cfg.model.tie_all = true;
  cfg.data.prepared_dir = testing::shared_prepared_parent();
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
  cfg.train.eval_every = 1000;
  cfg.train.progress = false;
  cfg.train.max_minutes = 0;
  cfg.train.max_steps = 30;
  cfg.train.log_every = 1;  // last_train_loss is then the last step's loss
  cfg.train.checkpoint_dir = testing::temp_dir("init_source");
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


}  // namespace
}  // namespace nmt
