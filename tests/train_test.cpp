// The trainer's parts, each on its own: BatchSource, EarlyStopping and the
// validators, TrainStep, CheckpointManager and Reporter.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "data/batch_source.h"
#include "eval/bleu.h"
#include "test_util.h"
#include "train/checkpoint_manager.h"
#include "train/loss.h"
#include "train/reporter.h"
#include "train/train_step.h"
#include "train/validators.h"
#include "util/errors.h"

namespace nmt {
namespace {

// Pairs of varied lengths with distinct contents: row i has tokens 4 + i.
ParallelCorpus numbered_corpus(int n) {
  ParallelCorpus c;
  std::mt19937_64 rng(5);
  for (int i = 0; i < n; ++i) {
    c.src.emplace_back(1 + rng() % 9, 4 + i);
    c.tgt.emplace_back(1 + rng() % 7, 4 + i);
    c.src_text.push_back(std::to_string(i));
    c.tgt_text.push_back(std::to_string(i));
  }
  return c;
}

// The pair each row of a batch holds (its first source token - 4).
std::vector<int64_t> row_ids(const Batch& b) {
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < b.src.size(0); ++r) ids.push_back(b.src[r][0].item<int64_t>() - 4);
  return ids;
}

TEST(BatchSource, EveryPairOncePerEpochThenTheNextEpoch) {
  const ParallelCorpus c = numbered_corpus(300);
  BatchSource source(c, 120, 0, 7);
  const int64_t batches = source.batches_in_epoch();
  std::vector<int> seen(300, 0);
  for (int64_t i = 0; i < batches; ++i) {
    const StepBatch b = source.next();
    EXPECT_EQ(b.position, (DataPosition{0, i}));
    EXPECT_EQ(b.global_rows, b.batch.src.size(0));
    EXPECT_EQ(b.global_tokens, b.batch.tokens);
    for (int64_t id : row_ids(b.batch)) ++seen[id];
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 300);
  EXPECT_EQ(source.position(), (DataPosition{1, 0}));  // wrapped as soon as the last was served
  EXPECT_EQ(source.next().position, (DataPosition{1, 0}));
}

TEST(BatchSource, RanksSplitEachGlobalBatchInOrder) {
  const ParallelCorpus c = numbered_corpus(200);
  BatchSource one(c, 150, 0, 3);
  std::vector<BatchSource> ranks;
  for (int r = 0; r < 3; ++r) ranks.emplace_back(c, 150, 0, 3, r, 3);
  for (int step = 0; step < 2 * one.batches_in_epoch() + 3; ++step) {
    const StepBatch global = one.next();
    std::vector<int64_t> joined;
    int64_t tokens = 0;
    for (int r = 0; r < 3; ++r) {
      const StepBatch part = ranks[r].next();
      EXPECT_EQ(part.first_row, static_cast<int64_t>(joined.size()));
      EXPECT_EQ(part.global_tokens, global.global_tokens);
      EXPECT_EQ(part.global_rows, global.global_rows);
      const auto ids = row_ids(part.batch);
      joined.insert(joined.end(), ids.begin(), ids.end());
      tokens += part.batch.tokens;
    }
    EXPECT_EQ(joined, row_ids(global.batch)) << "step " << step;
    EXPECT_EQ(tokens, global.global_tokens);
  }
}

TEST(BatchSource, SeekReplaysTheSameBatchesAndRejectsForeignPositions) {
  const ParallelCorpus c = numbered_corpus(120);
  BatchSource a(c, 100, 0, 11);
  for (int i = 0; i < 5; ++i) a.next();
  const DataPosition saved = a.position();
  const auto expected = row_ids(a.next().batch);
  BatchSource b(c, 100, 0, 11);
  b.seek(saved);
  EXPECT_EQ(row_ids(b.next().batch), expected);
  EXPECT_THROW(b.seek({0, b.batches_in_epoch() + 1}), InputError);
  b.seek({2, b.batches_in_epoch()});  // just after an epoch's last batch: the next epoch
  EXPECT_EQ(b.position(), (DataPosition{3, 0}));
}

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
  for (int i = 1; i <= 12; ++i) losses.push_back(step.run(source.next(), i).loss.item<double>());
  EXPECT_LT(losses.back(), losses.front() - 0.5);
  EXPECT_EQ(sync->before, 12);
  EXPECT_EQ(sync->after, 12);
  EXPECT_EQ(sync->sums, 12);
}

TEST(TrainStep, ARankWithoutRowsContributesNothing) {
  TinyRun t = tiny_run(3);
  TrainStep step(t.model, step_config(), torch::kCPU, std::make_shared<LocalSync>());
  BatchSource source(t.data, 0, 3, 1, /*rank=*/0, /*world_size=*/5);  // 3 rows over 5 ranks: 0 for rank 0
  const StepBatch b = source.next();
  ASSERT_EQ(b.batch.src.size(0), 0);
  std::vector<at::Tensor> before;
  for (const auto& p : t.model->parameters()) before.push_back(p.detach().clone());
  const StepOutput out = step.run(b, 1);
  EXPECT_EQ(out.loss.item<double>(), 0.0);
  EXPECT_EQ(out.grad_norm.item<double>(), 0.0);
  size_t i = 0;
  for (const auto& p : t.model->parameters()) EXPECT_TRUE(p.equal(before[i++]));
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
  cfg.tokenizer.cache_dir = std::filesystem::path(testing::toy_tokenizers().src_model).parent_path().parent_path().string();
  cfg.data.train_src = testing::toy("train.zh");
  cfg.data.train_tgt = testing::toy("train.en");
  cfg.data.valid_src = testing::toy("valid.zh");
  cfg.data.valid_tgt = testing::toy("valid.en");
  LocalSync local;
  auto manager = std::make_unique<CheckpointManager>(cfg, RunStart{}, local);
  EXPECT_FALSE(manager->resuming());
  TrainStep step(t.model, step_config(), torch::kCPU, std::make_shared<LocalSync>());
  BatchSource source(t.data, 0, 8, 1);
  for (int i = 1; i <= 3; ++i) step.run(source.next(), i);
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
  step.run(next, 4);
  fresh_step.run(next, 4);
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
      r.step(st, {at::full({}, double(i)), at::zeros({})}, 100, 1e-3);
    }
    r.evaluation(st, {{"loss", 1.5}, {"bleu", 20.0}}, true);
    Reporter inactive(tc, TrainingState{}, /*append=*/true, /*active=*/false);
    inactive.step(st, {at::full({}, 9.0), at::zeros({})}, 100, 1e-3);
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

}  // namespace
}  // namespace nmt
