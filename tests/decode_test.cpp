// Decoding (decode/decode.h) with a tiny model that has learnt 60 pairs:
// the cache, batching, per-sentence length limits, greedy and beam search.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include <torch/serialize.h>

#include "data/dataset.h"
#include "decode/continuous_search.h"
#include "decode/length_limit.h"
#include "decode/placeholder_constraint.h"
#include "decode/decode.h"
#include "data/placeholder_mask.h"
#include "model/build.h"
#include "model/parameter_table.h"
#include "ops/attention/backend.h"
#include "ops/top_k/cpu/top_k_cpu.h"
#include "support/seams.h"
#include "support/temp_dir.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/sha256.h"

namespace nmt {
namespace {

// A tiny model that has learnt 60 validation pairs, shared by the tests below.
struct Trained {
  std::unique_ptr<Tokenizer> zh, en;
  Transformer model{nullptr};
  std::vector<std::vector<int64_t>> sources;
  std::vector<std::string> src_text, tgt_text;
};

const Trained& trained() {
  static const Trained t = [] {
    Trained t;
    const auto& paths = testing::toy_tokenizers();
    t.zh = std::make_unique<Tokenizer>(paths.src_model);
    t.en = std::make_unique<Tokenizer>(paths.tgt_model);
    ParallelCorpus all = load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), *t.zh, *t.en, 64);
    ParallelCorpus c;
    for (int i = 0; i < 60; ++i) {
      c.src.push_back(all.src[i]), c.tgt.push_back(all.tgt[i]);
      t.src_text.push_back(all.src_text[i]), t.tgt_text.push_back(all.tgt_text[i]);
    }
    t.sources = c.src;
    Config cfg = testing::tiny_config();
    cfg.model.d_model = 64;
    cfg.model.ff_dim = 128;
    torch::manual_seed(0);
    t.model = build_model(cfg, t.zh->vocab_size(), t.en->vocab_size());
    // ctest runs each test in its own process: the first one trains, the
    // others load what it saved (written atomically, so never half a file).
    // The file is named by what the model depends on: this test program
    // (its size and time: a new build trains anew), the tokenizers and the
    // config, so that no run reuses a model another build or corpus made.
    Sha256 key;
    struct stat exe {};
    if (::stat("/proc/self/exe", &exe) == 0)
      key.update(std::to_string(exe.st_size) + ":" + std::to_string(exe.st_mtim.tv_sec) + "." +
                 std::to_string(exe.st_mtim.tv_nsec));
    key.update(testing::slurp(paths.src_model) + testing::slurp(paths.tgt_model) + to_yaml(cfg));
    const auto cached = std::filesystem::temp_directory_path() / ("nmt_test_decode_model_" + key.hex().substr(0, 16) + ".pt");
    if (std::filesystem::exists(cached)) {
      torch::load(t.model, cached.string());
      t.model->eval();
      return t;
    }
    std::vector<int64_t> idx(60);
    std::iota(idx.begin(), idx.end(), 0);
    testing::train_steps(t.model, make_batch(c, idx), 250, 3e-3);
    t.model->eval();
    AtomicFile file(cached.string());
    torch::save(t.model, file.temp_path());
    file.commit();
    return t;
  }();
  return t;
}

// The one rule for over-long sources: cut to max_positions, translated as
// the cut source, and reported with its line and length.
// The config's decode.beam and decode.length_penalty are the options every
// command starts from (its flags may change them).
TEST(Decode, OptionsTakeTheConfigsBeamAndLengthPenalty) {
  Config cfg;
  cfg.decode.beam = 4;
  cfg.decode.length_penalty = 0.6;
  const DecodeOptions o = decode_options(cfg, nullptr, 2.0);
  EXPECT_EQ(o.beam, 4);
  EXPECT_EQ(o.length_penalty, 0.6);
  EXPECT_EQ(decode_options(Config{}, nullptr, 2.0).beam, 0);
}

TEST(Decode, OverLongSourcesAreCutAndReported) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  const int64_t limit = model->options().max_positions();
  std::vector<int64_t> ids(static_cast<size_t>(limit + 40), t.sources[0][0]);
  EXPECT_EQ(fit_source(ids, model), limit + 40);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), limit);
  std::vector<int64_t> short_ids = t.sources[0];
  EXPECT_EQ(fit_source(short_ids, model), static_cast<int64_t>(t.sources[0].size()));
  EXPECT_EQ(short_ids, t.sources[0]);
  // A line long enough to pass the limit translates as its cut form does.
  std::string long_line;
  while (static_cast<int64_t>(t.zh->encode(long_line).size()) <= limit + 10) long_line += t.src_text[1];
  std::vector<int64_t> cut_ids = t.zh->encode(long_line);
  cut_ids.resize(static_cast<size_t>(limit));
  const DecodeOptions opts;
  const TranslationBatch batch = translate_lines(model, *t.zh, *t.en, {t.src_text[0], long_line}, opts, torch::kCPU);
  const std::vector<SourceCut>& cuts = batch.cuts;
  const std::vector<std::string>& out = batch.translations;
  ASSERT_EQ(cuts.size(), 1u);
  EXPECT_EQ(cuts[0].line, 1u);
  EXPECT_EQ(cuts[0].tokens, static_cast<int64_t>(t.zh->encode(long_line).size()));
  EXPECT_EQ(out[1], t.en->decode(decode(model, {cut_ids}, opts, torch::kCPU)[0]));
  EXPECT_EQ(describe_cuts({{1, 300}, {8, 281}}, 256),
            "2 sources longer than the 256 tokens this model reads were cut to the first 256: line 2 (300 tokens), "
            "line 9 (281 tokens)");
}

// Every backend: a decoding step is a one-row query (flash takes its row
// kernel there), and its logits come from the cache's transposed output table.
TEST(Decode, CachedStepsMatchFullRecomputation) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  torch::NoGradGuard no_grad;
  for (const auto& backend : ops::kAttentionBackends) {
    SCOPED_TRACE(backend.name);
    model->set_attention_backend(backend.value);
    auto [src, len] = make_source_batch({t.sources[0], t.sources[1], t.sources[2]});
    const auto memory = model->encode(src, len);
    DecoderCache cache = model->start_decoding(memory, len, 9);
    const auto tgt = torch::randint(4, t.en->vocab_size(), {3, 9}, torch::kLong);
    const auto full = model->decode_embedded(model->embed_target(tgt), memory,
                                             torch::full({3}, 9, torch::kLong), len);  // [3, 9, V]
    for (int64_t i = 0; i < 9; ++i) {
      const auto step = model->decode_step(tgt.select(1, i), cache);  // [3, V]
      EXPECT_LT((step - full.select(1, i)).abs().max().item<float>(), 1e-4) << "position " << i;
    }
    DecodeOptions cached, uncached;
    uncached.use_cache = false;
    EXPECT_EQ(decode(model, t.sources, cached, torch::kCPU), decode(model, t.sources, uncached, torch::kCPU));
    // Beam search reorders the cache every step: the same hypotheses either way.
    cached.beam = uncached.beam = 3;
    cached.length_penalty = uncached.length_penalty = 0.6;
    EXPECT_EQ(decode(model, t.sources, cached, torch::kCPU), decode(model, t.sources, uncached, torch::kCPU));
  }
  model->set_attention_backend(ops::AttentionBackend::kTorch);
}

// The fused CPU step (model/decoder_step_cpu.h) runs the op-by-op path's
// kernels in its order: the same logits to the bit, for a shared position
// (decode_step) and for rows at their own positions (decode_step_rows), with
// our two attention kernels; and so the same translations.
TEST(Decode, FusedStepGivesTheOpByOpLogits) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  torch::NoGradGuard no_grad;
  for (const auto backend : {ops::AttentionBackend::kFlash, ops::AttentionBackend::kNaive}) {
    SCOPED_TRACE(ops::backend_name(backend));
    model->set_attention_backend(backend);
    TransformerTestSeam::set_fused_decode_step(model, true);
    auto [src, len] = make_source_batch({t.sources[0], t.sources[1], t.sources[2]});
    const auto memory = model->encode(src, len);
    const auto tgt = torch::randint(4, t.en->vocab_size(), {3, 9}, torch::kLong);
    DecoderCache fused = model->start_decoding(memory, len, 9), plain = model->start_decoding(memory, len, 9);
    ASSERT_TRUE(model->fused_step_applies(tgt.select(1, 0), fused));
    for (int64_t i = 0; i < 9; ++i) {
      TransformerTestSeam::set_fused_decode_step(model, true);
      const auto a = model->decode_step(tgt.select(1, i), fused);  // [3, V]
      TransformerTestSeam::set_fused_decode_step(model, false);
      const auto b = model->decode_step(tgt.select(1, i), plain);
      EXPECT_TRUE(torch::equal(a, b)) << "position " << i << ": max difference " << (a - b).abs().max().item<float>();
    }
    // Rows at positions 4, 0 and 7 of their own sentences.
    const auto positions = torch::tensor({4, 0, 7}, torch::kLong);
    const auto tokens = torch::tensor({tgt[0][4].item<int64_t>(), tgt[1][0].item<int64_t>(), tgt[2][7].item<int64_t>()});
    TransformerTestSeam::set_fused_decode_step(model, true);
    const auto a = model->decode_step_rows(tokens, positions, 7, fused);
    TransformerTestSeam::set_fused_decode_step(model, false);
    const auto b = model->decode_step_rows(tokens, positions, 7, plain);
    EXPECT_TRUE(torch::equal(a, b)) << "max difference " << (a - b).abs().max().item<float>();
    DecodeOptions greedy, beam;
    beam.beam = 3;
    TransformerTestSeam::set_fused_decode_step(model, true);
    const auto greedy_fused = decode(model, t.sources, greedy, torch::kCPU);
    const auto beam_fused = decode(model, t.sources, beam, torch::kCPU);
    TransformerTestSeam::set_fused_decode_step(model, false);
    EXPECT_EQ(greedy_fused, decode(model, t.sources, greedy, torch::kCPU));
    EXPECT_EQ(beam_fused, decode(model, t.sources, beam, torch::kCPU));
  }
}

// Trains `model` 200 steps on the pairs of `c` until it knows them, then
// translates their sources on the LibTorch path (the torch backend's
// attention, every op on its own), greedy and beam 3: what the fused paths
// must reproduce. Leaves the model in evaluation mode on that path.
std::pair<std::vector<std::vector<int64_t>>, std::vector<std::vector<int64_t>>> learn_then_translate_op_by_op(
    Transformer& model, const ParallelCorpus& c) {
  std::vector<int64_t> idx(c.src.size());
  std::iota(idx.begin(), idx.end(), 0);
  testing::train_steps(model, make_batch(c, idx), 200, 3e-3);
  model->eval();
  torch::NoGradGuard no_grad;
  DecodeOptions greedy, beam;
  beam.beam = 3;
  model->set_attention_backend(ops::AttentionBackend::kTorch);
  TransformerTestSeam::set_fused_decode_step(model, false);
  auto greedy_out = decode(model, c.src, greedy, torch::kCPU);
  auto beam_out = decode(model, c.src, beam, torch::kCPU);
  int learnt = 0;
  for (size_t i = 0; i < c.src.size(); ++i) learnt += greedy_out[i] == c.tgt[i];
  EXPECT_GE(learnt, 20) << "the model should have learnt its pairs";
  return {std::move(greedy_out), std::move(beam_out)};
}

// model.tie_all on one shared vocabulary: the fused CPU paths (the step on
// float32 views, and prepare_decoding's packed layers and output projection,
// which find the one matrix through the parameter table) decode exactly as
// the LibTorch path does, op by op with its own attention, greedy and beam.
TEST(Decode, TieAllDecodesAlikeOnTheFusedAndLibTorchPaths) {
  const auto& paths = testing::toy_shared_tokenizers();
  ASSERT_EQ(testing::slurp(paths.src_model), testing::slurp(paths.tgt_model));
  const Tokenizer tok(paths.src_model);
  const ParallelCorpus all = load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), tok, tok, 64);
  ParallelCorpus c;
  for (int i = 0; i < 40; ++i) c.src.push_back(all.src[i]), c.tgt.push_back(all.tgt[i]);
  Config cfg = testing::tiny_config();
  cfg.model.d_model = 64;
  cfg.model.ff_dim = 128;
  cfg.tokenizer.shared = true;
  cfg.model.tie_all = true;
  torch::manual_seed(0);
  Transformer model = build_model(cfg, tok.vocab_size(), tok.vocab_size());
  const auto [greedy_torch, beam_torch] = learn_then_translate_op_by_op(model, c);
  torch::NoGradGuard no_grad;
  DecodeOptions greedy, beam;
  beam.beam = 3;
  TransformerTestSeam::set_fused_decode_step(model, true);
  for (const auto backend : {ops::AttentionBackend::kFlash, ops::AttentionBackend::kNaive}) {
    SCOPED_TRACE(ops::backend_name(backend));
    model->set_attention_backend(backend);
    auto [src, len] = make_source_batch({c.src[0], c.src[1], c.src[2]});
    const auto memory = model->encode(src, len);
    DecoderCache cache = model->start_decoding(memory, len, 6);
    ASSERT_TRUE(model->fused_step_applies(torch::full({3}, kStartId, torch::kLong), cache));
    EXPECT_EQ(decode(model, c.src, greedy, torch::kCPU), greedy_torch);
    EXPECT_EQ(decode(model, c.src, beam, torch::kCPU), beam_torch);
    model->prepare_decoding(ops::ComputeType::kFloat32);
    EXPECT_EQ(decode(model, c.src, greedy, torch::kCPU), greedy_torch);
    EXPECT_EQ(decode(model, c.src, beam, torch::kCPU), beam_torch);
    TransformerTestSeam::unprepare_decoding(model);
  }
  model->set_attention_backend(ops::AttentionBackend::kTorch);
}

// model.norm: post (LayerNorm after each residual add, no final norms): a
// small model learns its pairs, and every decoding path agrees with the
// LibTorch one op by op: the fused step's logits to the bit, the fused and
// prepared encoders and steps in float32 (same translations, greedy and
// beam), bf16 and int8 within their tolerance. (tests/export_test.sh has
// CTranslate2's own post-norm translate the export identically.)
TEST(Decode, PostNormDecodesAlikeOnEveryPath) {
  const Trained& base = trained();
  const ParallelCorpus all = load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), *base.zh, *base.en, 64);
  ParallelCorpus c;
  for (int i = 0; i < 40; ++i) c.src.push_back(all.src[i]), c.tgt.push_back(all.tgt[i]);
  Config cfg = testing::tiny_config();
  cfg.model.d_model = 64;
  cfg.model.ff_dim = 128;
  cfg.model.norm = "post";
  torch::manual_seed(0);
  Transformer model = build_model(cfg, base.zh->vocab_size(), base.en->vocab_size());
  EXPECT_FALSE(model->encoder_norm) << "post-norm stacks have no final norm";
  for (const ParamEntry& e : parameter_table(*model)) EXPECT_NE(e.role, ParamRole::kFinalNorm) << e.name;
  const auto [greedy_torch, beam_torch] = learn_then_translate_op_by_op(model, c);
  torch::NoGradGuard no_grad;
  DecodeOptions greedy, beam;
  beam.beam = 3;
  auto [src, len] = make_source_batch({c.src[0], c.src[1], c.src[2]});
  const auto tgt = torch::randint(4, base.en->vocab_size(), {3, 7}, torch::kLong);
  TransformerTestSeam::set_fused_decode_step(model, true);
  for (const auto backend : {ops::AttentionBackend::kFlash, ops::AttentionBackend::kNaive}) {
    SCOPED_TRACE(ops::backend_name(backend));
    model->set_attention_backend(backend);
    const auto memory = model->encode(src, len);
    DecoderCache fused = model->start_decoding(memory, len, 7), plain = model->start_decoding(memory, len, 7);
    ASSERT_TRUE(model->fused_step_applies(tgt.select(1, 0), fused));
    std::vector<torch::Tensor> reference;
    for (int64_t i = 0; i < 7; ++i) {
      TransformerTestSeam::set_fused_decode_step(model, true);
      const auto a = model->decode_step(tgt.select(1, i), fused);
      TransformerTestSeam::set_fused_decode_step(model, false);
      reference.push_back(model->decode_step(tgt.select(1, i), plain));
      EXPECT_TRUE(torch::equal(a, reference.back())) << "position " << i;
    }
    TransformerTestSeam::set_fused_decode_step(model, true);
    EXPECT_EQ(decode(model, c.src, greedy, torch::kCPU), greedy_torch);
    EXPECT_EQ(decode(model, c.src, beam, torch::kCPU), beam_torch);
    for (const auto& [type, tolerance] : std::vector<std::pair<ops::ComputeType, double>>{
             {ops::ComputeType::kFloat32, 1e-5}, {ops::ComputeType::kBf16, 3e-2}, {ops::ComputeType::kInt8, 3e-2}}) {
      SCOPED_TRACE(ops::compute_type_name(type));
      model->prepare_decoding(type);
      const auto m = model->encode(src, len);
      const auto valid = (torch::arange(src.size(1)).unsqueeze(0) < len.unsqueeze(1)).unsqueeze(2);
      EXPECT_LT(((m - memory) * valid).abs().max().item<double>() / memory.abs().max().item<double>(), tolerance);
      DecoderCache cache = model->start_decoding(m, len, 7);
      double worst = 0;
      for (int64_t i = 0; i < 7; ++i) {
        const auto l = model->decode_step(tgt.select(1, i), cache);
        worst = std::max(worst, (l - reference[i]).abs().max().item<double>() / reference[i].abs().max().item<double>());
      }
      EXPECT_LT(worst, tolerance) << "logits";
      if (type == ops::ComputeType::kFloat32) {
        EXPECT_EQ(decode(model, c.src, greedy, torch::kCPU), greedy_torch);
        EXPECT_EQ(decode(model, c.src, beam, torch::kCPU), beam_torch);
      }
    }
    TransformerTestSeam::unprepare_decoding(model);
  }
  model->set_attention_backend(ops::AttentionBackend::kTorch);
}

// Greedy's argmax picks what torch.argmax picks: the first of equal
// maxima, a NaN above everything; random rows, ties and NaN rows, in the
// vector part of a row and in its last few columns (the kernels.ops_* runs
// repeat this with each instruction set's copy).
TEST(Decode, ArgmaxRowsAsTorch) {
  torch::manual_seed(3);
  auto x = torch::randn({12, 6003});
  x[1].fill_(0.5);                                     // all equal: index 0
  x[2][10] = 9, x[2][4000] = 9;                        // a tie: the first
  x[3][123] = std::numeric_limits<float>::quiet_NaN();  // NaN wins
  x[3][4] = std::numeric_limits<float>::infinity();
  x[4][0] = std::numeric_limits<float>::quiet_NaN();
  x[5][6002] = 100;                                    // the last column
  x[6] = -std::numeric_limits<float>::infinity();
  x[7][6001] = std::numeric_limits<float>::quiet_NaN();  // a NaN in the last columns only
  x[8][17] = 50, x[8][6000] = 50;                      // a tie across the vectors and the tail
  x[9][5999] = 50, x[9][6000] = 50;                    // a tie across the last vector's end
  x[10][3000] = -std::numeric_limits<float>::infinity();
  x[11] = -std::numeric_limits<float>::infinity(), x[11][6001] = -1e30f;
  const auto want = x.argmax(-1);
  const std::vector<int64_t> got = argmax_rows(x);
  ASSERT_EQ(got.size(), 12u);
  for (int64_t r = 0; r < 12; ++r) EXPECT_EQ(got[r], want[r].item<int64_t>()) << "row " << r;
  // Strided rows (a view), widths around a vector's, and one column.
  for (int64_t width : {1, 7, 15, 16, 17, 50}) {
    const auto view = x.narrow(1, 100, width);
    const auto want_view = view.argmax(-1);
    const std::vector<int64_t> got_view = argmax_rows(view);
    for (int64_t r = 0; r < 12; ++r)
      EXPECT_EQ(got_view[r], want_view[r].item<int64_t>()) << "width " << width << ", row " << r;
  }
  EXPECT_EQ(argmax_rows(torch::ones({2, 1})), (std::vector<int64_t>{0, 0}));
}

// Beam search's selection kernel: per row, the log-softmax normalizer
// within 3e-7 of log_softmax computed on the row widened to double (its
// exponentials are float's, their sum double's), and the K
// largest entries, largest first, the lower index first among equals, -inf
// (a forbidden token) never chosen.
TEST(Decode, LogSoftmaxTopKAsTorch) {
  torch::manual_seed(5);
  auto x = torch::randn({8, 6003}) * 4;
  x[1][10] = 9, x[1][4000] = 9, x[1][77] = 9;         // a three-way tie at the top
  x[2][6002] = 30;                                     // the last column
  x[3].narrow(0, 0, 6000).fill_(-std::numeric_limits<float>::infinity());  // three finite values left
  x[4][5] = -std::numeric_limits<float>::infinity();
  x[5].fill_(0.25);                                    // all equal: the first K
  x[6][16] = 7, x[6][15] = 7, x[6][17] = 7;            // a tie across a vector boundary
  for (const int64_t k : {1, 2, 4, 5, 8}) {
    const auto logp = torch::log_softmax(x.to(torch::kDouble), -1);
    for (int64_t r = 0; r < x.size(0); ++r) {
      SCOPED_TRACE("k " + std::to_string(k) + ", row " + std::to_string(r));
      const torch::Tensor row = x[r].contiguous();
      std::vector<int64_t> index(k);
      std::vector<float> value(k);
      float max = 0;
      double log_sum = 0;
      ops::cpu::TopKParams p{row.data_ptr<float>(), row.size(0), k, &max, &log_sum, index.data(), value.data()};
      ops::cpu::log_softmax_top_k(p);
      // The wanted order: by value, then index (a stable sort of the row).
      std::vector<int64_t> order(static_cast<size_t>(row.size(0)));
      std::iota(order.begin(), order.end(), 0);
      const float* v = row.data_ptr<float>();
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[a] > v[b]; });
      for (int64_t i = 0; i < k; ++i) {
        if (std::isinf(v[order[i]])) {
          EXPECT_EQ(index[i], -1) << "place " << i;
          continue;
        }
        EXPECT_EQ(index[i], order[i]) << "place " << i;
        EXPECT_EQ(value[i], v[order[i]]);
        const double got = (static_cast<double>(value[i]) - max) - log_sum;
        EXPECT_NEAR(got, logp[r][order[i]].item<double>(), 3e-7);
      }
    }
  }
  // The largest entries only: max and log_sum untouched.
  float max = 123;
  double log_sum = 456;
  int64_t index = 0;
  float value = 0;
  const torch::Tensor row = x[0].contiguous();
  ops::cpu::log_softmax_top_k({row.data_ptr<float>(), row.size(0), 1, &max, &log_sum, &index, &value, false});
  EXPECT_EQ(index, row.argmax().item<int64_t>());
  EXPECT_EQ(max, 123);
  EXPECT_EQ(log_sum, 456);
}

// Beam search in the running batch: every hypothesis's cached keys/values
// follow it when the survivors of a step come from other rows (its parent's
// row, or a row the parent's keys/values were copied to), so the
// translations are the reference's, which recomputes every prefix and has
// no cache to get wrong. Sources it has learnt and the same reversed (unsure:
// beams change places often), several widths and penalties.
TEST(Decode, BeamRowsFollowTheirHypotheses) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  std::vector<std::vector<int64_t>> sources = t.sources;
  for (const auto& s : t.sources) sources.emplace_back(s.rbegin(), s.rend());
  // LibTorch's attention (op by op) and flash (the fused CPU step).
  const std::pair<ops::AttentionBackend, int64_t> cases[] = {
      {ops::AttentionBackend::kTorch, 4}, {ops::AttentionBackend::kFlash, 2},
      {ops::AttentionBackend::kFlash, 4}, {ops::AttentionBackend::kFlash, 5}};
  for (const auto& [backend, k] : cases) {
    model->set_attention_backend(backend);
    {
      SCOPED_TRACE(std::string(ops::backend_name(backend)) + ", beam " + std::to_string(k));
      DecodeOptions cached, reference;
      cached.beam = reference.beam = k;
      cached.max_len = reference.max_len = 30;
      cached.length_penalty = reference.length_penalty = k == 4 ? 0.6 : 0.0;
      reference.use_cache = false;
      const auto want = decode(model, sources, reference, torch::kCPU);
      // The search step by step: survivors that are not their parent's
      // first continuation take copied rows.
      ContinuousSearch search(model, cached, torch::kCPU);
      std::vector<uint64_t> tickets(sources.size());
      std::iota(tickets.begin(), tickets.end(), 0);
      search.add(sources, tickets);
      std::map<uint64_t, std::vector<int64_t>> got;
      EXPECT_EQ(search.rows(), static_cast<int64_t>(sources.size()));  // one row each before the first step
      for (int steps = 0; search.rows() > 0; ++steps) {
        for (auto& [ticket, ids] : search.step()) got[ticket] = ids;
        EXPECT_LE(search.rows(), k * search.sentences());
        ASSERT_LT(steps, 100);
      }
      EXPECT_GT(search.rows_copied(), static_cast<int64_t>(sources.size())) << "no survivor swaps to test";
      for (size_t i = 0; i < sources.size(); ++i) EXPECT_EQ(got[i], want[i]) << "sentence " << i;
    }
  }
  model->set_attention_backend(ops::AttentionBackend::kTorch);
}

// Sentences that join a running batch mid-search, greedy and beam ones side
// by side (as the service runs them), each get the translation they get
// decoded alone.
TEST(Decode, SentencesJoiningMidSearchGetTheirOwnTranslation) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  model->set_attention_backend(ops::AttentionBackend::kFlash);
  std::vector<std::vector<int64_t>> sources = t.sources;
  for (size_t i = 0; i < t.sources.size(); i += 2) sources.emplace_back(t.sources[i].rbegin(), t.sources[i].rend());
  DecodeOptions opts;
  opts.max_len_factor = 1.5;  // per-sentence limits, as the service runs
  opts.length_penalty = 0.6;
  const int64_t widths[] = {4, 0, 2, 5, 1};
  std::vector<std::vector<int64_t>> alone(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    DecodeOptions own = opts;
    own.beam = widths[i % 5];
    alone[i] = decode(model, {sources[i]}, own, torch::kCPU)[0];
  }
  ContinuousSearch search(model, opts, torch::kCPU);
  std::map<uint64_t, std::vector<int64_t>> got;
  size_t next = 0;
  int steps = 0;
  int64_t most_sentences = 0;
  // Three sentences join every third step, then the rest as the batch drains.
  while (got.size() < sources.size()) {
    if (next < sources.size() && (steps % 3 == 0 || search.rows() == 0)) {
      std::vector<std::vector<int64_t>> srcs;
      std::vector<uint64_t> tickets;
      std::vector<int64_t> beams;
      for (int j = 0; j < 3 && next < sources.size(); ++j, ++next)
        srcs.push_back(sources[next]), tickets.push_back(next), beams.push_back(widths[next % 5]);
      search.add(srcs, tickets, {}, beams);
      most_sentences = std::max(most_sentences, search.sentences());
    }
    for (auto& [ticket, ids] : search.step()) got[ticket] = ids;
    ASSERT_LT(++steps, 10000);
  }
  for (size_t i = 0; i < sources.size(); ++i)
    EXPECT_EQ(got[i], alone[i]) << "sentence " << i << ", beam " << widths[i % 5];
  // One copy of the encoder's keys/values per running sentence (not per
  // hypothesis), and finished sentences' copies taken again by newcomers.
  EXPECT_LT(most_sentences, static_cast<int64_t>(sources.size())) << "every sentence ran at once: nothing to reuse";
  EXPECT_LE(ContinuousSearchTestSeam::cross_slots_taken(search), most_sentences);
  EXPECT_EQ(search.rows(), 0);
  EXPECT_EQ(search.sentences(), 0);
  EXPECT_EQ(search.source_tokens(), 0);
  model->set_attention_backend(ops::AttentionBackend::kTorch);
}

// The fused encoder computes each sentence's own positions only: a short
// sentence beside a long one gets the bits it gets alone (float32 and int8,
// both attention kernels), and its padding positions are zeros.
TEST(Decode, FusedEncoderGivesASentenceItsBitsWhateverItsCompany) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  torch::NoGradGuard no_grad;
  size_t shortest = 0, longest = 0;
  for (size_t i = 0; i < t.sources.size(); ++i) {
    if (t.sources[i].size() < t.sources[shortest].size()) shortest = i;
    if (t.sources[i].size() > t.sources[longest].size()) longest = i;
  }
  ASSERT_LT(t.sources[shortest].size() + 2, t.sources[longest].size());
  auto [alone_src, alone_len] = make_source_batch({t.sources[shortest]});
  auto [pair_src, pair_len] = make_source_batch({t.sources[longest], t.sources[shortest]});
  const int64_t n = alone_src.size(1);
  for (const auto type : {ops::ComputeType::kFloat32, ops::ComputeType::kInt8})
    for (const auto backend : {ops::AttentionBackend::kFlash, ops::AttentionBackend::kNaive}) {
      SCOPED_TRACE(std::string(ops::compute_type_name(type)) + ", " + ops::backend_name(backend));
      model->set_attention_backend(backend);
      model->prepare_decoding(type);
      const auto alone = model->encode(alone_src, alone_len);  // [1, n, C]
      const auto pair = model->encode(pair_src, pair_len);     // [2, S, C]
      EXPECT_TRUE(torch::equal(pair[1].narrow(0, 0, n), alone[0]));
      EXPECT_EQ(pair[1].narrow(0, n, pair.size(1) - n).abs().max().item<float>(), 0.0f);
    }
  TransformerTestSeam::unprepare_decoding(model);
}

// Decoding in each compute type (prepare_decoding): the fused encoder and
// step near the op-by-op float32 path, each within its type's tolerance, and
// the learnt sentences translated as well as in float32 (the toy test's
// exact matches unchanged), greedy and beam. ctest also runs this under
// every lower NMT_CPU_ISA (kernels.ops_*): int8 on the AVX2 and plain C++
// kernels.
TEST(Decode, ComputeTypesStayNearFloat32) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  torch::NoGradGuard no_grad;
  model->set_attention_backend(ops::AttentionBackend::kFlash);
  auto [src, len] = make_source_batch({t.sources[0], t.sources[1], t.sources[2]});
  const auto tgt = torch::randint(4, t.en->vocab_size(), {3, 9}, torch::kLong);
  // The reference: float32, op by op (no prepared weights).
  TransformerTestSeam::unprepare_decoding(model);
  const auto memory = model->encode(src, len);
  DecoderCache plain = model->start_decoding(memory, len, 9);
  std::vector<torch::Tensor> logits;
  for (int64_t i = 0; i < 9; ++i) logits.push_back(model->decode_step(tgt.select(1, i), plain));
  const auto count_exact = [&](const std::vector<std::vector<int64_t>>& out) {
    int n = 0;
    for (size_t i = 0; i < out.size(); ++i) n += t.en->decode(out[i]) == t.tgt_text[i];
    return n;
  };
  DecodeOptions greedy, beam;
  beam.beam = 3;
  const int exact_greedy = count_exact(decode(model, t.sources, greedy, torch::kCPU));
  const int exact_beam = count_exact(decode(model, t.sources, beam, torch::kCPU));
  EXPECT_GE(exact_greedy, 55);
  // Error relative to the largest magnitude: float32 differs only in
  // summation order; bf16 keeps 8 bits of mantissa, int8 7 bits per value.
  // The model is trained here, by the machine's BLAS, so its weights (and
  // int8's error on them) vary a little between machines: int8's worst
  // logit was under 0.03 on earlier machines and 0.0319 on a Xeon with AMX
  // (the same under every kernel ISA: int8's products are exact).
  const std::vector<std::pair<ops::ComputeType, double>> types = {
      {ops::ComputeType::kFloat32, 1e-5}, {ops::ComputeType::kBf16, 3e-2}, {ops::ComputeType::kInt8, 4e-2}};
  const auto relative = [](const torch::Tensor& a, const torch::Tensor& b) {
    return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
  };
  for (const auto& [type, tolerance] : types) {
    SCOPED_TRACE(ops::compute_type_name(type));
    model->prepare_decoding(type);
    ASSERT_TRUE(model->decoding_prepared());
    EXPECT_EQ(model->compute_type(), type);
    const auto m = model->encode(src, len);
    // Compared at the sentences' own positions: the fused encoder computes
    // only those and leaves zeros at the padding (the op-by-op path computes
    // values there that nothing reads).
    const auto valid = (torch::arange(src.size(1)).unsqueeze(0) < len.unsqueeze(1)).unsqueeze(2);  // [B, S, 1]
    ASSERT_LT(valid.all().item<bool>(), 1) << "the batch should have padding";
    EXPECT_LT(relative(m * valid, memory * valid), tolerance) << "encoder output";
    EXPECT_EQ(m.masked_select(~valid).abs().max().item<float>(), 0.0f) << "padding positions";
    DecoderCache cache = model->start_decoding(m, len, 9);
    ASSERT_TRUE(model->fused_step_applies(tgt.select(1, 0), cache));
    double worst = 0;
    for (int64_t i = 0; i < 9; ++i) worst = std::max(worst, relative(model->decode_step(tgt.select(1, i), cache), logits[i]));
    EXPECT_LT(worst, tolerance) << "logits";
    if (type != ops::ComputeType::kFloat32) EXPECT_GT(worst, 1e-5) << "as close as float32: not " << ops::compute_type_name(type) << "?";
    EXPECT_EQ(count_exact(decode(model, t.sources, greedy, torch::kCPU)), exact_greedy) << "greedy";
    EXPECT_EQ(count_exact(decode(model, t.sources, beam, torch::kCPU)), exact_beam) << "beam 3";
  }
  // The torch backend has no packed path of its own: bf16 and int8 bring
  // our attention kernel, float32 stays op by op.
  model->set_attention_backend(ops::AttentionBackend::kTorch);
  model->prepare_decoding(ops::ComputeType::kInt8);
  DecoderCache cache = model->start_decoding(model->encode(src, len), len, 9);
  EXPECT_TRUE(model->fused_step_applies(tgt.select(1, 0), cache));
  model->prepare_decoding(ops::ComputeType::kFloat32);
  cache = model->start_decoding(model->encode(src, len), len, 9);
  EXPECT_FALSE(model->fused_step_applies(tgt.select(1, 0), cache));
  TransformerTestSeam::unprepare_decoding(model);
}

// Ending a sentence once no live beam can beat its best ended one gives the
// translation that waiting for every beam gives, with and without a length
// penalty.
TEST(Decode, BeamSearchStopsEarlyWithTheSameTranslations) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  // Sources it has learnt, and the same sources reversed, on which it is
  // unsure and its beams end at different lengths.
  std::vector<std::vector<int64_t>> sources = t.sources;
  for (const auto& s : t.sources) sources.emplace_back(s.rbegin(), s.rend());
  for (const double alpha : {0.0, 0.6, 1.0, 2.0}) {
    DecodeOptions early, waiting;
    early.beam = waiting.beam = 4;
    early.max_len = waiting.max_len = 30;
    early.length_penalty = waiting.length_penalty = alpha;
    waiting.beam_early_stop = false;
    const auto stopped = decode(model, sources, early, torch::kCPU);
    EXPECT_EQ(stopped, decode(model, sources, waiting, torch::kCPU)) << "alpha " << alpha;
    // And the reference without the cache (its own loop, the same rules).
    if (alpha == 1.0) {
      waiting.use_cache = false;
      EXPECT_EQ(stopped, decode(model, sources, waiting, torch::kCPU)) << "alpha " << alpha << ", reference";
    }
  }
}

TEST(Decode, TranslationDoesNotDependOnTheBatch) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  DecodeOptions opts;
  const auto batched = decode(model, t.sources, opts, torch::kCPU);  // mixed lengths together
  for (size_t i = 0; i < t.sources.size(); i += 7)
    EXPECT_EQ(decode(model, {t.sources[i]}, opts, torch::kCPU)[0], batched[i]) << "sentence " << i;
  opts.beam = 3;
  const auto beam_batched = decode(model, t.sources, opts, torch::kCPU);
  for (size_t i = 0; i < t.sources.size(); i += 11)
    EXPECT_EQ(decode(model, {t.sources[i]}, opts, torch::kCPU)[0], beam_batched[i]) << "sentence " << i;
}

// Continuous batching: sentences that join a running batch at different
// steps, and leave it when they finish, get exactly decode()'s tokens, and
// the per-row step equals the shared-position step, logit for logit.
TEST(Decode, ContinuousBatchingGivesEachSentenceItsOwnTokens) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  torch::NoGradGuard no_grad;
  // With LibTorch's attention (op by op) and with flash (the fused CPU step,
  // whose running batch reads its rows out of larger slot tensors).
  for (const auto backend : {ops::AttentionBackend::kTorch, ops::AttentionBackend::kFlash}) {
    SCOPED_TRACE(ops::backend_name(backend));
    model->set_attention_backend(backend);
    // decode_step_rows at equal positions is decode_step.
    auto [src, len] = make_source_batch({t.sources[0], t.sources[1], t.sources[2]});
    const auto memory = model->encode(src, len);
    DecoderCache a = model->start_decoding(memory, len, 6), b = model->start_decoding(memory, len, 6);
    const auto tgt = torch::randint(4, t.en->vocab_size(), {3, 6}, torch::kLong);
    for (int64_t i = 0; i < 6; ++i) {
      const auto shared = model->decode_step(tgt.select(1, i), a);
      const auto rows = model->decode_step_rows(tgt.select(1, i), torch::full({3}, i, torch::kLong), i, b);
      EXPECT_TRUE(torch::equal(shared, rows)) << "position " << i;
    }
    DecodeOptions opts;
    opts.max_len_factor = 1.5;  // per-sentence limits, as the service runs
    const auto alone = decode(model, t.sources, opts, torch::kCPU);
    ContinuousSearch stream(model, opts, torch::kCPU);
    std::map<uint64_t, std::vector<int64_t>> got;
    size_t next = 0;
    int steps = 0;
    // Three sentences join every other step, then the rest as the batch drains.
    while (got.size() < t.sources.size()) {
      if (next < t.sources.size() && (steps % 2 == 0 || stream.rows() == 0)) {
        std::vector<std::vector<int64_t>> srcs;
        std::vector<uint64_t> tickets;
        for (int k = 0; k < 3 && next < t.sources.size(); ++k, ++next) srcs.push_back(t.sources[next]), tickets.push_back(next);
        stream.add(srcs, tickets);
      }
      for (auto& [ticket, ids] : stream.step()) got[ticket] = ids;
      ASSERT_LT(++steps, 10000);
    }
    for (size_t i = 0; i < t.sources.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "sentence " << i;
    EXPECT_EQ(stream.rows(), 0);
    EXPECT_EQ(stream.source_tokens(), 0);
    // release() at every step: nothing while rows run; when the batch has
    // drained it frees the slots, which the next add() makes anew, and the
    // translations are the same.
    EXPECT_GT(ContinuousSearchTestSeam::slot_rows(stream), 0);
    stream.release();
    EXPECT_EQ(ContinuousSearchTestSeam::slot_rows(stream), 0);
    got.clear(), next = 0, steps = 0;
    int released = 0;
    while (got.size() < t.sources.size()) {
      // The first half joins only once the batch has drained, the rest every 5 steps.
      if (next < t.sources.size() && (stream.rows() == 0 || (2 * next > t.sources.size() && steps % 5 == 0))) {
        std::vector<std::vector<int64_t>> srcs;
        std::vector<uint64_t> tickets;
        for (int k = 0; k < 3 && next < t.sources.size(); ++k, ++next) srcs.push_back(t.sources[next]), tickets.push_back(next);
        stream.add(srcs, tickets);
      }
      for (auto& [ticket, ids] : stream.step()) got[ticket] = ids;
      const int64_t had = ContinuousSearchTestSeam::slot_rows(stream);
      stream.release();
      if (stream.rows() > 0) EXPECT_EQ(ContinuousSearchTestSeam::slot_rows(stream), had) << "released while rows run";
      released += stream.rows() == 0;
      ASSERT_LT(++steps, 10000);
    }
    EXPECT_GT(released, 1) << "the batch never drained between adds";
    for (size_t i = 0; i < t.sources.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "sentence " << i << " after release()";
  }
  model->set_attention_backend(ops::AttentionBackend::kTorch);
}

// Each sentence stops at its own limit (max_len_factor × its source + slack),
// whatever else is in the batch: finished sentences leave the batch while the
// others go on.
TEST(Decode, LengthLimitsArePerSentence) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  DecodeOptions free_run, limited;
  limited.max_len_factor = 0.4;
  for (int64_t beam : {0, 3}) {
    free_run.beam = limited.beam = beam;
    const auto full = decode(model, t.sources, free_run, torch::kCPU);
    const auto cut = decode(model, t.sources, limited, torch::kCPU);
    int truncated = 0;
    for (size_t i = 0; i < t.sources.size(); ++i) {
      const auto limit = static_cast<size_t>(target_limit(limited, static_cast<int64_t>(t.sources[i].size())));
      EXPECT_LT(limit, static_cast<size_t>(limited.max_len));
      ASSERT_LE(cut[i].size(), limit) << "sentence " << i << " beam " << beam;
      if (full[i].size() < limit) EXPECT_EQ(cut[i], full[i]) << "sentence " << i << " beam " << beam;
      // Counted as stopped at the limit exactly when it did not end by itself.
      const auto src_len = static_cast<int64_t>(t.sources[i].size());
      EXPECT_EQ(reached_limit(limited, model->options().max_positions(), src_len, static_cast<int64_t>(cut[i].size())),
                full[i].size() >= limit)
          << "sentence " << i << " beam " << beam;
      if (full[i].size() > limit) {
        ++truncated;
        if (beam == 0)  // greedy: the same tokens, cut short
          EXPECT_EQ(cut[i], std::vector<int64_t>(full[i].begin(), full[i].begin() + limit)) << "sentence " << i;
      }
      if (i % 9 == 0) EXPECT_EQ(decode(model, {t.sources[i]}, limited, torch::kCPU)[0], cut[i]) << "sentence " << i;
    }
    EXPECT_GE(truncated, 5) << "beam " << beam << ": the limit should bite on some sentences";
  }
}

// The corpus's ratio as the limit needs it, (t + 1 - 5) / s, at the 99.9%
// quantile (1/100 steps, rounded up), and the factor decoding takes from it.
TEST(LengthLimit, RatioQuantileAndTheFactorFromIt) {
  LengthRatioCounter c;
  EXPECT_TRUE(std::isnan(c.quantile(kLengthRatioQuantile)));
  for (int i = 0; i < 998; ++i) c.add(2, 9);  // (9 + 1 - 5) / 2 = 2.5
  c.add(3, 20);                              // 16 / 3 = 5.33..., rounded up
  c.add(1, 3);                               // within the slack: 0
  EXPECT_EQ(c.pairs(), 1000u);
  EXPECT_DOUBLE_EQ(c.quantile(0.5), 2.5);
  EXPECT_DOUBLE_EQ(c.quantile(kLengthRatioQuantile), 2.5);  // one pair in 1000 may lie above
  EXPECT_DOUBLE_EQ(c.quantile(1.0), 5.34);
  LengthRatioCounter other;
  other.add(1, 60);  // 56: a second counter's pairs merged in
  c.merge(other);
  EXPECT_DOUBLE_EQ(c.quantile(1.0), 56.0);
  EXPECT_EQ(c.pairs(), 1001u);
  // The factor: 1.5 × the ratio (at least 2); a factor set by hand wins.
  EXPECT_DOUBLE_EQ(resolve_length_factor(std::nullopt, 10).factor, 15);
  EXPECT_DOUBLE_EQ(resolve_length_factor(std::nullopt, 2.17).factor, 3.26);
  EXPECT_DOUBLE_EQ(resolve_length_factor(std::nullopt, 0.5).factor, kMinDerivedFactor);
  const LengthFactor set = resolve_length_factor(3.0, 10);
  EXPECT_EQ(set.factor, 3.0);
  EXPECT_EQ(set.origin, "decode.max_len_factor; auto would be 15, from the training corpus's target/source length "
                        "ratio 10 (99.9% of its pairs)");
  // A checkpoint that records no ratio: the earlier default, and it says so.
  const LengthFactor old = resolve_length_factor(std::nullopt, std::nan(""));
  EXPECT_EQ(old.factor, kLegacyLengthFactor);
  EXPECT_NE(old.origin.find("records no target/source length ratio"), std::string::npos) << old.origin;
  DecodeOptions o;
  o.max_len = 80;
  o.max_len_factor = 15;
  EXPECT_EQ(decode_limit(o, 256, 2), 35);
  EXPECT_EQ(decode_limit(o, 256, 10), 80);  // max_len
  EXPECT_EQ(decode_limit(o, 30, 10), 29);   // the model's positions
  EXPECT_TRUE(reached_limit(o, 256, 2, 35));
  EXPECT_FALSE(reached_limit(o, 256, 2, 34));
  EXPECT_EQ(describe_length_limited({2, 9}, 20, o, 256),
            "2 of 20 translations stopped at the length limit (15 × source pieces + 5, at most 80 target pieces) "
            "before ending, maybe cut short: line 3, line 10 (raise --max-len-factor or --max-len)");
}

// An empty source gives an empty output, in every mode, and leaves its
// batch-mates' translations as they are alone.
TEST(Decode, EmptySourcesGiveEmptyOutputs) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  for (const int64_t beam : {0, 3}) {
    for (const bool cache : {true, false}) {
      SCOPED_TRACE("beam " + std::to_string(beam) + (cache ? ", cache" : ", no cache"));
      DecodeOptions opts;
      opts.beam = beam;
      opts.use_cache = cache;
      const std::vector<std::vector<int64_t>> with_empty{{}, t.sources[0], {}, t.sources[1]};
      const auto got = decode(model, with_empty, opts, torch::kCPU);
      const auto alone = decode(model, {t.sources[0], t.sources[1]}, opts, torch::kCPU);
      ASSERT_EQ(got.size(), 4u);
      EXPECT_TRUE(got[0].empty() && got[2].empty());
      EXPECT_EQ(got[1], alone[0]);
      EXPECT_EQ(got[3], alone[1]);
      EXPECT_FALSE(alone[0].empty());
      EXPECT_EQ(decode(model, {{}}, opts, torch::kCPU), std::vector<std::vector<int64_t>>{{}});
    }
  }
}

TEST(Decode, BeamOneIsGreedyAndBeamsEndProperly) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  DecodeOptions greedy, beam1, beam4;
  beam1.beam = 1;  // the beam-search code path with one beam
  beam4.beam = 4;
  beam4.length_penalty = 0.6;
  const auto g = decode(model, t.sources, greedy, torch::kCPU);
  EXPECT_EQ(g, decode(model, t.sources, beam1, torch::kCPU));
  const auto b = decode(model, t.sources, beam4, torch::kCPU);
  int exact_g = 0, exact_b = 0;
  for (size_t i = 0; i < t.sources.size(); ++i) {
    exact_g += t.en->decode(g[i]) == t.tgt_text[i];
    exact_b += t.en->decode(b[i]) == t.tgt_text[i];
    for (int64_t id : b[i]) EXPECT_GT(id, kEndId);  // no specials inside a hypothesis
  }
  EXPECT_GE(exact_g, 55);  // learnt by heart
  EXPECT_GE(exact_b, exact_g - 1);
}

// The mask itself, row by row, on a made-up vocabulary of 10 with
// "sentinels" 5, 6 and 7 (the third sentinel is not in the vocabulary).
TEST(PlaceholderConstraint, ForbidsExactlyWhatEachRowMayNotWrite) {
  const PlaceholderConstraint constraint({5, 6, -1, 7});
  ASSERT_TRUE(constraint.active());
  EXPECT_FALSE(PlaceholderConstraint({}).active());
  const std::vector<int64_t> owed0{5, 5, 6}, tok0{8, 5};  // owes 5 and 6 once more; 7 never
  const std::vector<int64_t> owed1{5}, tok1{5};           // done: no sentinel, <end> allowed
  const std::vector<int64_t> owed3{6, 7}, tok3{8, 9, 9};  // 2 missing, 2 tokens left: forced
  const std::vector<int64_t> owed4, tok4;                 // a source without placeholders
  const std::vector<PlaceholderConstraint::Row> rows{
      {&owed0, &tok0, 10}, {&owed1, &tok1, 10}, {}, {&owed3, &tok3, 5}, {&owed4, &tok4, 10}};
  const double inf = std::numeric_limits<double>::infinity();
  // expected[r][v]: -inf where forbidden, else the score as it was.
  const std::vector<std::vector<int64_t>> forbidden{{3, 7}, {5, 6, 7}, {}, {0, 1, 2, 3, 4, 5, 8, 9}, {5, 6, 7}};
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const torch::Tensor before = torch::randn({5, 10}, dtype);
    torch::Tensor scores = before.clone();
    constraint.apply(scores, rows);
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t v = 0; v < 10; ++v) {
        const bool off = std::count(forbidden[r].begin(), forbidden[r].end(), v) > 0;
        const double got = scores[r][v].item<double>();
        if (off) EXPECT_EQ(got, -inf) << "row " << r << " id " << v;
        else EXPECT_EQ(got, before[r][v].item<double>()) << "row " << r << " id " << v;
      }
  }
}

// What a masked source owes: each sentinel as often as the masked line has
// it, as target ids.
TEST(PlaceholderConstraint, SourceTextOwesItsSentinels) {
  DecodeOptions opts;
  opts.protect_placeholders = true;
  for (int k = 1; k <= data::kMaxSentinels; ++k) opts.sentinel_ids.push_back(100 + k);
  EXPECT_EQ(SourceText("%s 和 %d：%s", opts).owed(), (std::vector<int64_t>{101, 102, 103}));
  EXPECT_EQ(SourceText("<b>是</b>或<b>否</b>", opts).owed(), (std::vector<int64_t>{101, 102, 101, 102}));
  EXPECT_TRUE(SourceText("没有占位符", opts).owed().empty());
  opts.sentinel_ids[1] = -1;  // a sentinel the vocabulary lacks is not owed
  EXPECT_EQ(SourceText("%s 和 %d", opts).owed(), (std::vector<int64_t>{101}));
  opts.sentinel_ids.clear();  // decode.placeholder_constraint false
  EXPECT_TRUE(SourceText("%s", opts).owed().empty());
  opts.protect_placeholders = false;
  opts.sentinel_ids.assign(data::kMaxSentinels, 7);
  EXPECT_TRUE(SourceText("%s", opts).owed().empty());
}

// Decoding under the constraint, with three ordinary target pieces playing
// the sentinels (the tiny model never saw real ones): greedy, beam search
// and continuous batching write each owed id exactly as often as owed and
// no other, also when the length limit leaves room for nothing else.
TEST(Decode, PlaceholderConstraintPlacesEachOwedSentinelExactly) {
  const Trained& t = trained();
  Transformer model = t.model;
  const testing::ModelPathScope restore(model);  // the model is shared with the other tests
  const std::vector<int64_t> fake{20, 21, 22};
  const std::vector<std::vector<int64_t>> kinds{{}, {20}, {21, 21, 22}};
  std::vector<std::vector<int64_t>> owed;
  for (size_t i = 0; i < t.sources.size(); ++i) owed.push_back(kinds[i % 3]);
  const auto counts_ok = [&](const std::vector<int64_t>& out, const std::vector<int64_t>& want) {
    for (int64_t id : fake)
      if (std::count(out.begin(), out.end(), id) != std::count(want.begin(), want.end(), id)) return false;
    return true;
  };
  DecodeOptions opts;
  opts.sentinel_ids = fake;
  opts.max_len_factor = 1.5;
  const auto free_run = decode(model, t.sources, opts, torch::kCPU);  // no owed given: unconstrained
  int changed = 0;
  for (int64_t beam : {0, 4}) {
    opts.beam = beam;
    const auto got = decode(model, t.sources, opts, torch::kCPU, owed);
    for (size_t i = 0; i < t.sources.size(); ++i) {
      EXPECT_TRUE(counts_ok(got[i], owed[i])) << "sentence " << i << " beam " << beam;
      if (beam == 0) changed += got[i] != free_run[i];
      if (beam == 0 && counts_ok(free_run[i], owed[i])) EXPECT_EQ(got[i], free_run[i]) << "sentence " << i;
    }
  }
  EXPECT_GE(changed, 30) << "the owed ids should change most translations";
  // Continuous batching gives decode()'s constrained tokens.
  opts.beam = 0;
  const auto alone = decode(model, t.sources, opts, torch::kCPU, owed);
  ContinuousSearch stream(model, opts, torch::kCPU);
  std::map<uint64_t, std::vector<int64_t>> got;
  for (size_t i = 0; i < t.sources.size(); i += 7) {
    std::vector<std::vector<int64_t>> srcs, ow;
    std::vector<uint64_t> tickets;
    for (size_t j = i; j < std::min(i + 7, t.sources.size()); ++j)
      srcs.push_back(t.sources[j]), ow.push_back(owed[j]), tickets.push_back(j);
    stream.add(srcs, tickets, ow);
    for (auto& [ticket, ids] : stream.step()) got[ticket] = ids;
  }
  for (int steps = 0; stream.rows() > 0; ++steps) {
    for (auto& [ticket, ids] : stream.step()) got[ticket] = ids;
    ASSERT_LT(steps, 10000);
  }
  for (size_t i = 0; i < t.sources.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "sentence " << i;
  // Three tokens allowed, three owed: the sentinels are all there is.
  opts.max_len = 3;
  opts.max_len_factor = 0;
  for (int64_t beam : {0, 3}) {
    opts.beam = beam;
    const auto tight = decode(model, {t.sources[2], t.sources[5]}, opts, torch::kCPU, {kinds[2], kinds[2]});
    for (const auto& out : tight) {
      std::vector<int64_t> sorted = out;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, kinds[2]) << "beam " << beam;
    }
  }
}

}  // namespace
}  // namespace nmt
