#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <numeric>

#include "checkpoint/checkpoint.h"
#include "train/checkpoint_writer.h"
#include "model/build.h"
#include "data/dataset.h"
#include "decode/translator.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/trainer.h"
#include "util/errors.h"

namespace nmt {
namespace {

Transformer tiny_model(int64_t src_vocab = 50, int64_t tgt_vocab = 40) {
  torch::manual_seed(0);
  return build_model(testing::tiny_config(), src_vocab, tgt_vocab);
}

TEST(Model, ShapesForEncoderDecoderAndCrossAttention) {
  Transformer m = tiny_model();
  m->eval();
  const auto src = torch::randint(4, 50, {3, 7}, torch::kLong);
  const auto src_len = torch::tensor({7, 5, 1}, torch::kLong);
  const auto tgt = torch::randint(4, 40, {3, 4}, torch::kLong);  // Tq=4 != Tk=7
  const auto tgt_len = torch::tensor({4, 2, 3}, torch::kLong);
  const auto memory = m->encode(src, src_len);
  EXPECT_EQ(memory.sizes(), (std::vector<int64_t>{3, 7, 32}));
  const auto logits = m->decode_embedded(m->embed_target(tgt), memory, tgt_len, src_len);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 4, 40}));
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());

  auto& layer = *m->decoder_layers->ptr<DecoderLayerImpl>(0);
  const auto y = torch::randn({3, 4, 32});
  const auto kv = layer.cross_attn->project_memory(memory);  // [B, S, 2C]
  EXPECT_EQ(kv.sizes(), (std::vector<int64_t>{3, 7, 64}));
  const auto cross = layer.cross_attn(y, kv, src_len, ModelRuntime{});
  EXPECT_EQ(cross.sizes(), (std::vector<int64_t>{3, 4, 32}));
  const auto p = layer.cross_attn->probs(y, kv, src_len);
  EXPECT_EQ(p.sizes(), (std::vector<int64_t>{3, 4, 4, 7}));
  // Padded source keys get no weight; rows sum to one.
  EXPECT_EQ(p[2].narrow(-1, 1, 6).abs().max().item<float>(), 0.0f);
  EXPECT_NEAR(p.sum(-1).sub(1).abs().max().item<float>(), 0.0f, 1e-5);
}

// Positions past a row's length are masked on both sides: whatever tokens
// stand there (not only <pad>), the real positions' outputs do not move.
TEST(Model, PaddingDoesNotChangeOutputs) {
  Transformer m = tiny_model();
  m->eval();
  const auto src = torch::randint(4, 50, {1, 5}, torch::kLong);
  const auto tgt = torch::randint(4, 40, {1, 3}, torch::kLong);
  const auto len = torch::tensor({5}, torch::kLong);
  const auto tlen = torch::tensor({3}, torch::kLong);
  const auto src_padded = torch::cat({src, torch::randint(0, 50, {1, 4}, torch::kLong)}, 1);
  const auto tgt_padded = torch::cat({tgt, torch::randint(0, 40, {1, 6}, torch::kLong)}, 1);
  const auto a = m->forward(src, len, tgt, tlen);                // [1, 3, V]
  const auto b = m->forward(src_padded, len, tgt_padded, tlen);  // [1, 9, V]
  EXPECT_LT((a - b.narrow(1, 0, 3)).abs().max().item<float>(), 1e-5);
  // Without the causal mask the target lengths alone must hide the padding.
  m->set_disable_causal_mask(true);
  const auto c = m->forward(src, len, tgt, tlen);
  const auto d = m->forward(src_padded, len, tgt_padded, tlen);
  EXPECT_LT((c - d.narrow(1, 0, 3)).abs().max().item<float>(), 1e-5);
}

// ~20 pairs of the toy corpus, learnt by heart by a tiny model.
TEST(Model, TinyModelMemorizesTwentyPairs) {
  const auto& paths = testing::toy_tokenizers();
  const Tokenizer zh(paths.src_model), en(paths.tgt_model);
  ParallelCorpus all = load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), zh, en, 64);
  ParallelCorpus c;
  for (int i = 0; i < 20; ++i) {
    c.src.push_back(all.src[i]), c.tgt.push_back(all.tgt[i]);
    c.src_text.push_back(all.src_text[i]), c.tgt_text.push_back(all.tgt_text[i]);
  }
  Config cfg = testing::tiny_config();
  cfg.model.d_model = 64;
  cfg.model.ff_dim = 128;
  torch::manual_seed(0);
  Transformer m = build_model(cfg, zh.vocab_size(), en.vocab_size());
  std::vector<int64_t> idx(20);
  std::iota(idx.begin(), idx.end(), 0);
  testing::train_steps(m, make_batch(c, idx), 300, 3e-3);
  m->eval();
  DecodeOptions greedy;
  greedy.batch_size = 8;
  greedy.max_len = 40;
  const auto hyps = translate_lines(m, zh, en, c.src_text, greedy, torch::kCPU);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(hyps[i], c.tgt_text[i]) << "pair " << i << ": " << c.src_text[i];
}

TEST(Checkpoint, SaveLoadGivesIdenticalOutputs) {
  const auto& paths = testing::toy_tokenizers();
  const Tokenizer zh(paths.src_model), en(paths.tgt_model);
  Config cfg = testing::tiny_config();
  torch::manual_seed(1);
  Transformer m = build_model(cfg, zh.vocab_size(), en.vocab_size());
  m->eval();
  const std::string dir = testing::temp_dir("ckpt") + "/last";
  TrainingState st;
  st.step = 7;
  save_checkpoint(dir, m, nullptr, st, cfg, paths.src_model, paths.tgt_model);
  LoadedCheckpoint ck = load_checkpoint(dir, torch::kCPU);
  EXPECT_EQ(ck.state.step, 7);
  EXPECT_EQ(to_yaml(ck.cfg), to_yaml(cfg));
  const auto src = torch::randint(4, zh.vocab_size(), {2, 6}, torch::kLong);
  const auto tgt = torch::randint(4, en.vocab_size(), {2, 5}, torch::kLong);
  const auto sl = torch::tensor({6, 3}, torch::kLong), tl = torch::tensor({5, 4}, torch::kLong);
  EXPECT_TRUE(m(src, sl, tgt, tl).equal(ck.model(src, sl, tgt, tl)));
  // A run folder resolves to its checkpoint.
  EXPECT_EQ(locate_checkpoint(std::filesystem::path(dir).parent_path().string(), CheckpointUse::kUse), dir);
}

TEST(Checkpoint, MissingOrCorruptFilesAreInputErrors) {
  const auto& paths = testing::toy_tokenizers();
  Config cfg = testing::tiny_config();
  Transformer m = build_model(cfg, 100, 100);
  const std::string dir = testing::temp_dir("ckpt_bad") + "/last";
  save_checkpoint(dir, m, nullptr, TrainingState{}, cfg, paths.src_model, paths.tgt_model);
  // Vocabulary sizes differ from the tokenizers': the weights do not fit.
  EXPECT_THROW(load_checkpoint(dir, torch::kCPU), InputError);
  std::filesystem::remove(dir + "/model.pt");
  EXPECT_THROW(load_checkpoint(dir, torch::kCPU), InputError);
}

}  // namespace
}  // namespace nmt

namespace nmt {
namespace {

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
