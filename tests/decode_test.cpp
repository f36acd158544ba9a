// Decoding (runtime/search.h, runtime/engine.h) with a tiny model that has
// learnt 60 pairs: the runtime's CPU model against the LibTorch model and
// a state that recomputes every prefix, the caches of a running batch,
// per-sentence length limits, greedy and beam search, compute types.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>

#include <torch/serialize.h>

#include "data/dataset.h"
#include "data/placeholder_mask.h"
#include "model/build.h"
#include "model/parameter_table.h"
#include "ops/argmax/cpu/argmax_cpu.h"
#include "ops/attention/backend.h"
#include "ops/top_k/cpu/top_k_cpu.h"
#include "runtime/length_limit.h"
#include "runtime/placeholder_constraint.h"
#include "runtime/translation.h"
#include "support/runtime_models.h"
#include "support/temp_dir.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/sha256.h"

namespace nmt {
namespace {

using runtime::Search;
using testing::cpu_model;
using testing::RecomputingState;
using testing::search_all;
using testing::torch_model;
using Ids = std::vector<std::vector<int64_t>>;

// A tiny model that has learnt 60 validation pairs, shared by the tests below.
struct Trained {
  std::shared_ptr<const Tokenizer> zh, en;
  Transformer model{nullptr};
  Ids sources;
  std::vector<std::string> src_text, tgt_text;
};

const Trained& trained() {
  static const Trained t = [] {
    Trained t;
    const auto& paths = testing::toy_tokenizers();
    t.zh = std::make_shared<const Tokenizer>(paths.src_model);
    t.en = std::make_shared<const Tokenizer>(paths.tgt_model);
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

// A LibTorch model of its own on the shared weights (its attention backend
// is its own to set).
Transformer copy_of(const Transformer& model) {
  auto copy = std::dynamic_pointer_cast<TransformerImpl>(model->clone());
  copy->eval();
  return Transformer(copy);
}

// The logits of one decoder step after another on `state`: row r reads
// sources[r] and is fed tokens[r][i] at position starts[r] + i (earlier
// positions fed tokens[r][0] first: starts only shift where rows are).
// Returns [steps][rows * V].
std::vector<std::vector<float>> step_logits(runtime::DecoderState& state, const Ids& sources, const Ids& tokens) {
  const int64_t n = static_cast<int64_t>(sources.size()), steps = static_cast<int64_t>(tokens[0].size());
  int64_t longest = 0;
  for (const auto& s : sources) longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
  state.resize(n, steps, longest, 0, 0);
  std::vector<int64_t> slots(static_cast<size_t>(n)), lengths;
  std::iota(slots.begin(), slots.end(), 0);
  for (const auto& s : sources) lengths.push_back(static_cast<int64_t>(s.size()));
  state.add_sources(sources, slots);
  std::vector<std::vector<float>> out;
  for (int64_t i = 0; i < steps; ++i) {
    std::vector<int64_t> tok, pos(static_cast<size_t>(n), i);
    for (const auto& t : tokens) tok.push_back(t[static_cast<size_t>(i)]);
    const float* l = state.step(n, tok.data(), pos.data(), slots.data(), lengths.data());
    out.emplace_back(l, l + n * state.vocab());
  }
  return out;
}

// Random target tokens (no specials): [rows][steps].
Ids random_tokens(int64_t rows, int64_t steps, int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor t = torch::randint(4, vocab, {rows, steps}, torch::kLong).contiguous();
  Ids out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) out[r].assign(t[r].data_ptr<int64_t>(), t[r].data_ptr<int64_t>() + steps);
  return out;
}

// max |a - b| / max |b|.
double relative(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff = std::max(diff, std::abs(double(a[i]) - b[i])), scale = std::max(scale, std::abs(double(b[i])));
  return diff / scale;
}

// The runtime's encoder output for `sources` as one padded batch: [B, S, C].
std::vector<float> cpu_encode(const runtime::CpuModel& m, const Ids& sources, int64_t* width) {
  auto [src, len] = make_source_batch(sources);
  src = src.contiguous(), len = len.contiguous();
  *width = src.size(1);
  std::vector<float> out(static_cast<size_t>(src.numel() * m.shape().d_model));
  m.encode(src.data_ptr<int64_t>(), len.data_ptr<int64_t>(), src.size(0), src.size(1), out.data());
  return out;
}

std::vector<float> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

// An engine on `model` with the trained tokenizers.
runtime::Engine engine_of(std::shared_ptr<const runtime::DecodingModel> model, int threads = 1) {
  const Trained& t = trained();
  return runtime::Engine(std::move(model), t.zh, t.en, DecodeOptions{}, threads);
}

// The config's decode.beam and decode.length_penalty are the options every
// command starts from (its flags may change them).
TEST(Decode, OptionsTakeTheConfigsBeamAndLengthPenalty) {
  DecodeConfig d;
  d.beam = 4;
  d.length_penalty = 0.6;
  const DecodeOptions o = decode_options(d, false, nullptr, 2.0);
  EXPECT_EQ(o.beam, 4);
  EXPECT_EQ(o.length_penalty, 0.6);
  EXPECT_EQ(decode_options(DecodeConfig{}, false, nullptr, 2.0).beam, 0);
}

// The one rule for over-long sources: cut to max_positions, translated as
// the cut source, and reported with its line and length.
TEST(Decode, OverLongSourcesAreCutAndReported) {
  const Trained& t = trained();
  const int64_t limit = t.model->options().max_positions();
  std::vector<int64_t> ids(static_cast<size_t>(limit + 40), t.sources[0][0]);
  EXPECT_EQ(fit_source(ids, limit), limit + 40);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), limit);
  std::vector<int64_t> short_ids = t.sources[0];
  EXPECT_EQ(fit_source(short_ids, limit), static_cast<int64_t>(t.sources[0].size()));
  EXPECT_EQ(short_ids, t.sources[0]);
  // A line long enough to pass the limit translates as its cut form does.
  std::string long_line;
  while (static_cast<int64_t>(t.zh->encode(long_line).size()) <= limit + 10) long_line += t.src_text[1];
  std::vector<int64_t> cut_ids = t.zh->encode(long_line);
  cut_ids.resize(static_cast<size_t>(limit));
  const auto model = cpu_model(t.model);
  const runtime::Engine engine = engine_of(model);
  const DecodeOptions opts;
  const TranslationBatch batch = engine.translate({t.src_text[0], long_line}, opts);
  ASSERT_EQ(batch.cuts.size(), 1u);
  EXPECT_EQ(batch.cuts[0].line, 1u);
  EXPECT_EQ(batch.cuts[0].tokens, static_cast<int64_t>(t.zh->encode(long_line).size()));
  EXPECT_EQ(batch.translations[1], t.en->decode(search_all(*model, {cut_ids}, opts)[0]));
  EXPECT_EQ(describe_cuts({{1, 300}, {8, 281}}, 256),
            "2 sources longer than the 256 tokens this model reads were cut to the first 256: line 2 (300 tokens), "
            "line 9 (281 tokens)");
}

// The LibTorch model's cached step (decode_step, the GPU's and the torch
// backend's path) gives the teacher-forced forward's logits with every
// attention backend; and the search on every model the runtime drives (the
// LibTorch model, the CPU runtime with each kernel, packed or on views)
// gives the translations of a state that recomputes every prefix, greedy
// and beam (which reorders the caches every step).
TEST(Decode, CachedStepsMatchFullRecomputation) {
  const Trained& t = trained();
  Transformer model = copy_of(t.model);
  torch::NoGradGuard no_grad;
  const Ids three{t.sources[0], t.sources[1], t.sources[2]};
  const Ids tokens = random_tokens(3, 9, t.en->vocab_size(), 1);
  for (const auto& backend : ops::kAttentionBackends) {
    SCOPED_TRACE(backend.name);
    model->set_attention_backend(backend.value);
    auto [src, len] = make_source_batch(three);
    const auto memory = model->encode(src, len);
    DecoderCache cache = model->start_decoding(memory, len, 9);
    const torch::Tensor tgt = torch::stack({torch::tensor(tokens[0]), torch::tensor(tokens[1]), torch::tensor(tokens[2])});
    const auto full = model->decode_embedded(model->embed_target(tgt), memory,
                                             torch::full({3}, 9, torch::kLong), len);  // [3, 9, V]
    for (int64_t i = 0; i < 9; ++i) {
      const auto step = model->decode_step(tgt.select(1, i), torch::full({3}, i, torch::kLong), i, cache);  // [3, V]
      EXPECT_LT((step - full.select(1, i)).abs().max().item<float>(), 1e-4) << "position " << i;
    }
  }
  const int64_t positions = t.model->options().max_positions();
  DecodeOptions greedy, beam;
  beam.beam = 3;
  beam.length_penalty = 0.6;
  const Ids want_greedy = search_all(std::make_unique<RecomputingState>(t.model), t.sources, greedy, positions);
  const Ids want_beam = search_all(std::make_unique<RecomputingState>(t.model), t.sources, beam, positions);
  const std::vector<std::pair<std::string, std::shared_ptr<const runtime::DecodingModel>>> models = {
      {"LibTorch, torch attention", torch_model(copy_of(t.model), ops::AttentionBackend::kTorch)},
      {"LibTorch, flash attention", torch_model(copy_of(t.model), ops::AttentionBackend::kFlash)},
      {"runtime, flash", cpu_model(t.model)},
      {"runtime, naive", cpu_model(t.model, ops::ComputeType::kFloat32, true)},
      {"runtime, flash, views", cpu_model(t.model, ops::ComputeType::kFloat32, false, false)}};
  for (const auto& [name, m] : models) {
    SCOPED_TRACE(name);
    EXPECT_EQ(search_all(*m, t.sources, greedy), want_greedy);
    EXPECT_EQ(search_all(*m, t.sources, beam), want_beam);
  }
}

// The runtime's encoder and decoder step on the model's float32 weights
// where they lie run the LibTorch model's kernels in its order: with the
// naive kernel the same logits to the bit; with flash within float32's
// rounding (the runtime's encoder reads each sentence on its own, LibTorch's
// the padded batch: the same sums in another order). A row at its own
// position gets the logits it gets in step with the others.
TEST(Decode, RuntimeStepGivesTheLibTorchLogits) {
  const Trained& t = trained();
  const Ids three{t.sources[0], t.sources[1], t.sources[2]};
  const Ids tokens = random_tokens(3, 9, t.en->vocab_size(), 2);
  for (const auto backend : {ops::AttentionBackend::kFlash, ops::AttentionBackend::kNaive}) {
    SCOPED_TRACE(ops::backend_name(backend));
    const bool naive = backend == ops::AttentionBackend::kNaive;
    const auto runtime = cpu_model(t.model, ops::ComputeType::kFloat32, naive, false);
    const auto libtorch = torch_model(copy_of(t.model), backend);
    const auto a = step_logits(*runtime->new_state(), three, tokens);
    const auto b = step_logits(*libtorch->new_state(), three, tokens);
    for (size_t i = 0; i < a.size(); ++i) {
      if (naive) EXPECT_EQ(a[i], b[i]) << "position " << i << ": " << relative(a[i], b[i]);
      else EXPECT_LT(relative(a[i], b[i]), 1e-6) << "position " << i;
    }
    // Rows at positions 4, 0 and 7 of their own sentences, after the same prefixes.
    for (auto* m : {static_cast<const runtime::DecodingModel*>(runtime.get()),
                    static_cast<const runtime::DecodingModel*>(libtorch.get())}) {
      auto state = m->new_state();
      const auto in_step = step_logits(*state, three, tokens);
      const int64_t tok[] = {tokens[0][4], tokens[1][0], tokens[2][7]}, pos[] = {4, 0, 7}, cross[] = {0, 1, 2};
      const int64_t len[] = {static_cast<int64_t>(three[0].size()), static_cast<int64_t>(three[1].size()),
                             static_cast<int64_t>(three[2].size())};
      const float* l = state->step(3, tok, pos, cross, len);
      const int64_t v = state->vocab();
      for (int64_t r = 0; r < 3; ++r)
        EXPECT_TRUE(std::equal(l + r * v, l + (r + 1) * v, in_step[static_cast<size_t>(pos[r])].begin() + r * v))
            << m->description() << ", row " << r;
    }
  }
}

// Trains `model` 200 steps on the pairs of `c` until it knows them, then
// translates their sources with LibTorch's attention on the LibTorch model,
// greedy and beam 3: what the runtime must reproduce.
std::pair<Ids, Ids> learn_then_translate_with_libtorch(Transformer& model, const ParallelCorpus& c) {
  std::vector<int64_t> idx(c.src.size());
  std::iota(idx.begin(), idx.end(), 0);
  testing::train_steps(model, make_batch(c, idx), 200, 3e-3);
  model->eval();
  DecodeOptions greedy, beam;
  beam.beam = 3;
  const auto reference = torch_model(copy_of(model), ops::AttentionBackend::kTorch);
  Ids greedy_out = search_all(*reference, c.src, greedy), beam_out = search_all(*reference, c.src, beam);
  int learnt = 0;
  for (size_t i = 0; i < c.src.size(); ++i) learnt += greedy_out[i] == c.tgt[i];
  EXPECT_GE(learnt, 20) << "the model should have learnt its pairs";
  return {std::move(greedy_out), std::move(beam_out)};
}

// model.tie_all on one shared vocabulary: the runtime (which finds the one
// matrix by its name for the embeddings and the output projection, packed
// and on views) decodes exactly as the LibTorch model does with its own
// attention, greedy and beam.
TEST(Decode, TieAllDecodesAlikeInTheRuntimeAndLibTorch) {
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
  const auto [greedy_torch, beam_torch] = learn_then_translate_with_libtorch(model, c);
  ASSERT_TRUE(model_shape(*model).tie_all);
  DecodeOptions greedy, beam;
  beam.beam = 3;
  for (const bool naive : {false, true})
    for (const bool packed : {true, false}) {
      SCOPED_TRACE(std::string(naive ? "naive" : "flash") + (packed ? ", packed" : ", views"));
      const auto m = cpu_model(model, ops::ComputeType::kFloat32, naive, packed);
      EXPECT_EQ(search_all(*m, c.src, greedy), greedy_torch);
      EXPECT_EQ(search_all(*m, c.src, beam), beam_torch);
    }
}

// model.norm: post (LayerNorm after each residual add, no final norms): a
// small model learns its pairs, and the runtime agrees with the LibTorch
// model: its naive step on views gives the logits to the bit, its encoder and
// step in each compute type stay within the type's tolerance, and float32
// translates the same, greedy and beam. (tests/export_test.sh has
// CTranslate2's own post-norm translate the export identically.)
TEST(Decode, PostNormDecodesAlikeInTheRuntimeAndLibTorch) {
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
  const auto [greedy_torch, beam_torch] = learn_then_translate_with_libtorch(model, c);
  torch::NoGradGuard no_grad;
  DecodeOptions greedy, beam;
  beam.beam = 3;
  const Ids three{c.src[0], c.src[1], c.src[2]};
  const Ids tokens = random_tokens(3, 7, base.en->vocab_size(), 3);
  auto [src, len] = make_source_batch(three);
  const std::vector<float> memory = to_vector(model->encode(src, len));
  const auto valid = to_vector((torch::arange(src.size(1)).unsqueeze(0) < len.unsqueeze(1)).unsqueeze(2).expand(
      {src.size(0), src.size(1), model->options().d_model()}));
  const auto masked = [&](std::vector<float> v) {
    for (size_t i = 0; i < v.size(); ++i) v[i] *= valid[i];
    return v;
  };
  for (const bool naive : {false, true}) {
    SCOPED_TRACE(naive ? "naive" : "flash");
    const auto backend = naive ? ops::AttentionBackend::kNaive : ops::AttentionBackend::kFlash;
    const auto reference = step_logits(*torch_model(copy_of(model), backend)->new_state(), three, tokens);
    const auto views = step_logits(*cpu_model(model, ops::ComputeType::kFloat32, naive, false)->new_state(), three, tokens);
    if (naive) EXPECT_EQ(views, reference);  // flash: RuntimeStepGivesTheLibTorchLogits says why not
    for (const auto& [type, tolerance] : std::vector<std::pair<ops::ComputeType, double>>{
             {ops::ComputeType::kFloat32, 1e-5}, {ops::ComputeType::kBf16, 3e-2}, {ops::ComputeType::kInt8, 3e-2}}) {
      SCOPED_TRACE(ops::compute_type_name(type));
      const auto m = cpu_model(model, type, naive);
      int64_t width = 0;
      EXPECT_LT(relative(masked(cpu_encode(m->model(), three, &width)), masked(memory)), tolerance) << "encoder";
      const auto got = step_logits(*m->new_state(), three, tokens);
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, relative(got[i], reference[i]));
      EXPECT_LT(worst, tolerance) << "logits";
      if (type == ops::ComputeType::kFloat32) {
        EXPECT_EQ(search_all(*m, c.src, greedy), greedy_torch);
        EXPECT_EQ(search_all(*m, c.src, beam), beam_torch);
      }
    }
  }
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
  const std::vector<int64_t> got = runtime::argmax_rows(x.data_ptr<float>(), 12, 6003);
  ASSERT_EQ(got.size(), 12u);
  for (int64_t r = 0; r < 12; ++r) EXPECT_EQ(got[r], want[r].item<int64_t>()) << "row " << r;
  // Strided rows (the kernel's stride), widths around a vector's, and one column.
  for (int64_t width : {1, 7, 15, 16, 17, 50}) {
    const auto view = x.narrow(1, 100, width);
    const auto want_view = view.argmax(-1);
    std::vector<int64_t> got_view(12);
    ops::cpu::argmax_rows({view.data_ptr<float>(), got_view.data(), 12, width, x.stride(0)});
    for (int64_t r = 0; r < 12; ++r)
      EXPECT_EQ(got_view[r], want_view[r].item<int64_t>()) << "width " << width << ", row " << r;
  }
  const float ones[] = {1, 1};
  EXPECT_EQ(runtime::argmax_rows(ones, 2, 1), (std::vector<int64_t>{0, 0}));
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
// translations are those of the state that recomputes every prefix and has
// no cache to get wrong. Sources it has learnt and the same reversed
// (unsure: beams change places often), several widths and penalties.
TEST(Decode, BeamRowsFollowTheirHypotheses) {
  const Trained& t = trained();
  Ids sources = t.sources;
  for (const auto& s : t.sources) sources.emplace_back(s.rbegin(), s.rend());
  const int64_t positions = t.model->options().max_positions();
  const std::vector<std::pair<std::string, std::shared_ptr<const runtime::DecodingModel>>> models = {
      {"LibTorch", torch_model(copy_of(t.model), ops::AttentionBackend::kTorch)}, {"runtime", cpu_model(t.model)}};
  for (const auto& [name, m] : models)
    for (const int64_t k : {2, 4, 5}) {
      if (name == "LibTorch" && k != 4) continue;
      SCOPED_TRACE(name + ", beam " + std::to_string(k));
      DecodeOptions opts;
      opts.beam = k;
      opts.max_len = 30;
      opts.length_penalty = k == 4 ? 0.6 : 0.0;
      const Ids want = search_all(std::make_unique<RecomputingState>(t.model), sources, opts, positions);
      // The search step by step: survivors that are not their parent's
      // first continuation take copied rows.
      Search search(m->new_state(), opts, positions);
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

// Sentences that join a running batch mid-search, greedy and beam ones side
// by side (as the service runs them), each get the translation they get
// decoded alone.
TEST(Decode, SentencesJoiningMidSearchGetTheirOwnTranslation) {
  const Trained& t = trained();
  const auto model = cpu_model(t.model);
  Ids sources = t.sources;
  for (size_t i = 0; i < t.sources.size(); i += 2) sources.emplace_back(t.sources[i].rbegin(), t.sources[i].rend());
  DecodeOptions opts;
  opts.max_len_factor = 1.5;  // per-sentence limits, as the service runs
  opts.length_penalty = 0.6;
  const int64_t widths[] = {4, 0, 2, 5, 1};
  Ids alone(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    DecodeOptions own = opts;
    own.beam = widths[i % 5];
    alone[i] = search_all(*model, {sources[i]}, own)[0];
  }
  Search search(model->new_state(), opts, model->shape().max_positions);
  std::map<uint64_t, std::vector<int64_t>> got;
  size_t next = 0;
  int steps = 0;
  int64_t most_sentences = 0;
  // Three sentences join every third step, then the rest as the batch drains.
  while (got.size() < sources.size()) {
    if (next < sources.size() && (steps % 3 == 0 || search.rows() == 0)) {
      Ids srcs;
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
  EXPECT_LE(search.cross_slots_taken(), most_sentences);
  EXPECT_EQ(search.rows(), 0);
  EXPECT_EQ(search.sentences(), 0);
  EXPECT_EQ(search.source_tokens(), 0);
}

// The runtime's encoder computes each sentence's own positions only: a
// short sentence beside a long one gets the bits it gets alone (float32 and
// int8, both attention kernels), and its padding positions are zeros.
TEST(Decode, RuntimeEncoderGivesASentenceItsBitsWhateverItsCompany) {
  const Trained& t = trained();
  size_t shortest = 0, longest = 0;
  for (size_t i = 0; i < t.sources.size(); ++i) {
    if (t.sources[i].size() < t.sources[shortest].size()) shortest = i;
    if (t.sources[i].size() > t.sources[longest].size()) longest = i;
  }
  ASSERT_LT(t.sources[shortest].size() + 2, t.sources[longest].size());
  const int64_t c = t.model->options().d_model(), n = static_cast<int64_t>(t.sources[shortest].size());
  for (const auto type : {ops::ComputeType::kFloat32, ops::ComputeType::kInt8})
    for (const bool naive : {false, true}) {
      SCOPED_TRACE(std::string(ops::compute_type_name(type)) + (naive ? ", naive" : ", flash"));
      const auto m = cpu_model(t.model, type, naive);
      int64_t alone_width = 0, pair_width = 0;
      const std::vector<float> alone = cpu_encode(m->model(), {t.sources[shortest]}, &alone_width);  // [1, n, C]
      const std::vector<float> pair = cpu_encode(m->model(), {t.sources[longest], t.sources[shortest]}, &pair_width);
      const float* second = pair.data() + pair_width * c;  // [S, C]
      EXPECT_TRUE(std::equal(second, second + n * c, alone.begin()));
      EXPECT_EQ(*std::max_element(second + n * c, second + pair_width * c,
                                  [](float a, float b) { return std::abs(a) < std::abs(b); }),
                0.0f);
    }
}

// Decoding in each compute type: the runtime's encoder and step near the
// LibTorch model's float32 (LibTorch's attention, op by op), each within
// its type's tolerance, and the learnt sentences translated as well as in
// float32 (the toy test's exact matches unchanged), greedy and beam. ctest
// also runs this under every lower NMT_CPU_ISA (kernels.ops_*): int8 on the
// AVX2 and plain C++ kernels.
TEST(Decode, ComputeTypesStayNearFloat32) {
  const Trained& t = trained();
  torch::NoGradGuard no_grad;
  const Ids three{t.sources[0], t.sources[1], t.sources[2]};
  const Ids tokens = random_tokens(3, 9, t.en->vocab_size(), 4);
  Transformer model = copy_of(t.model);
  auto [src, len] = make_source_batch(three);
  const std::vector<float> memory = to_vector(model->encode(src, len));
  const auto reference = step_logits(*torch_model(model, ops::AttentionBackend::kTorch)->new_state(), three, tokens);
  const int64_t c = model->options().d_model();
  // Compared at the sentences' own positions: the runtime's encoder
  // computes only those and leaves zeros at the padding (LibTorch's
  // computes values there that nothing reads).
  const std::vector<float> valid = to_vector(
      (torch::arange(src.size(1)).unsqueeze(0) < len.unsqueeze(1)).unsqueeze(2).expand({src.size(0), src.size(1), c}));
  ASSERT_TRUE(std::count(valid.begin(), valid.end(), 0.0f) > 0) << "the batch should have padding";
  const auto count_exact = [&](const Ids& out) {
    int n = 0;
    for (size_t i = 0; i < out.size(); ++i) n += t.en->decode(out[i]) == t.tgt_text[i];
    return n;
  };
  DecodeOptions greedy, beam;
  beam.beam = 3;
  const auto libtorch = torch_model(copy_of(t.model), ops::AttentionBackend::kTorch);
  const int exact_greedy = count_exact(search_all(*libtorch, t.sources, greedy));
  const int exact_beam = count_exact(search_all(*libtorch, t.sources, beam));
  EXPECT_GE(exact_greedy, 55);
  // Error relative to the largest magnitude: float32 differs only in
  // summation order; bf16 keeps 8 bits of mantissa, int8 7 bits per value.
  // The model is trained here, by the machine's BLAS, so its weights (and
  // int8's error on them) vary a little between machines: int8's worst
  // logit was under 0.03 on earlier machines and 0.0319 on a Xeon with AMX
  // (the same under every kernel ISA: int8's products are exact).
  const std::vector<std::pair<ops::ComputeType, double>> types = {
      {ops::ComputeType::kFloat32, 1e-5}, {ops::ComputeType::kBf16, 3e-2}, {ops::ComputeType::kInt8, 4e-2}};
  for (const auto& [type, tolerance] : types) {
    SCOPED_TRACE(ops::compute_type_name(type));
    const auto m = cpu_model(t.model, type);
    int64_t width = 0;
    const std::vector<float> got = cpu_encode(m->model(), three, &width);
    ASSERT_EQ(got.size(), memory.size());
    double diff = 0, scale = 0, padding = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (valid[i] == 0) padding = std::max(padding, double(std::abs(got[i])));
      else diff = std::max(diff, std::abs(double(got[i]) - memory[i])), scale = std::max(scale, double(std::abs(memory[i])));
    }
    EXPECT_LT(diff / scale, tolerance) << "encoder output";
    EXPECT_EQ(padding, 0.0) << "padding positions";
    const auto logits = step_logits(*m->new_state(), three, tokens);
    double worst = 0;
    for (size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, relative(logits[i], reference[i]));
    EXPECT_LT(worst, tolerance) << "logits";
    if (type != ops::ComputeType::kFloat32) EXPECT_GT(worst, 1e-5) << "as close as float32: not " << ops::compute_type_name(type) << "?";
    EXPECT_EQ(count_exact(search_all(*m, t.sources, greedy)), exact_greedy) << "greedy";
    EXPECT_EQ(count_exact(search_all(*m, t.sources, beam)), exact_beam) << "beam 3";
  }
}

// Ending a sentence once no live beam can beat its best ended one gives the
// translation that waiting for every beam gives, with and without a length
// penalty.
TEST(Decode, BeamSearchStopsEarlyWithTheSameTranslations) {
  const Trained& t = trained();
  const auto model = cpu_model(t.model);
  // Sources it has learnt, and the same sources reversed, on which it is
  // unsure and its beams end at different lengths.
  Ids sources = t.sources;
  for (const auto& s : t.sources) sources.emplace_back(s.rbegin(), s.rend());
  for (const double alpha : {0.0, 0.6, 1.0, 2.0}) {
    DecodeOptions early, waiting;
    early.beam = waiting.beam = 4;
    early.max_len = waiting.max_len = 30;
    early.length_penalty = waiting.length_penalty = alpha;
    waiting.beam_early_stop = false;
    const Ids stopped = search_all(*model, sources, early);
    EXPECT_EQ(stopped, search_all(*model, sources, waiting)) << "alpha " << alpha;
  }
}

// Each sentence's translation is its own, whatever else is decoded with it.
TEST(Decode, TranslationDoesNotDependOnTheBatch) {
  const Trained& t = trained();
  for (const auto& [name, model] : std::vector<std::pair<std::string, std::shared_ptr<const runtime::DecodingModel>>>{
           {"runtime", cpu_model(t.model)}, {"LibTorch", torch_model(copy_of(t.model), ops::AttentionBackend::kTorch)}}) {
    SCOPED_TRACE(name);
    DecodeOptions opts;
    const Ids batched = search_all(*model, t.sources, opts);  // mixed lengths together
    for (size_t i = 0; i < t.sources.size(); i += 7)
      EXPECT_EQ(search_all(*model, {t.sources[i]}, opts)[0], batched[i]) << "sentence " << i;
    opts.beam = 3;
    const Ids beam_batched = search_all(*model, t.sources, opts);
    for (size_t i = 0; i < t.sources.size(); i += 11)
      EXPECT_EQ(search_all(*model, {t.sources[i]}, opts)[0], beam_batched[i]) << "sentence " << i;
  }
}

// Continuous batching: sentences that join a running batch at different
// steps, and leave it when they finish, get exactly the tokens of a fixed
// batch; release() frees the slots only once the batch has drained.
TEST(Decode, ContinuousBatchingGivesEachSentenceItsOwnTokens) {
  const Trained& t = trained();
  // The LibTorch model (its slot tensors) and the runtime's (plain buffers).
  for (const auto& [name, model] : std::vector<std::pair<std::string, std::shared_ptr<const runtime::DecodingModel>>>{
           {"LibTorch", torch_model(copy_of(t.model), ops::AttentionBackend::kTorch)}, {"runtime", cpu_model(t.model)}}) {
    SCOPED_TRACE(name);
    DecodeOptions opts;
    opts.max_len_factor = 1.5;  // per-sentence limits, as the service runs
    const Ids alone = search_all(*model, t.sources, opts);
    Search stream(model->new_state(), opts, model->shape().max_positions);
    std::map<uint64_t, std::vector<int64_t>> got;
    size_t next = 0;
    int steps = 0;
    // Three sentences join every other step, then the rest as the batch drains.
    while (got.size() < t.sources.size()) {
      if (next < t.sources.size() && (steps % 2 == 0 || stream.rows() == 0)) {
        Ids srcs;
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
    EXPECT_GT(stream.state().rows(), 0);
    stream.release();
    EXPECT_EQ(stream.state().rows(), 0);
    got.clear(), next = 0, steps = 0;
    int released = 0;
    while (got.size() < t.sources.size()) {
      // The first half joins only once the batch has drained, the rest every 5 steps.
      if (next < t.sources.size() && (stream.rows() == 0 || (2 * next > t.sources.size() && steps % 5 == 0))) {
        Ids srcs;
        std::vector<uint64_t> tickets;
        for (int k = 0; k < 3 && next < t.sources.size(); ++k, ++next) srcs.push_back(t.sources[next]), tickets.push_back(next);
        stream.add(srcs, tickets);
      }
      for (auto& [ticket, ids] : stream.step()) got[ticket] = ids;
      const int64_t had = stream.state().rows();
      stream.release();
      if (stream.rows() > 0) EXPECT_EQ(stream.state().rows(), had) << "released while rows run";
      released += stream.rows() == 0;
      ASSERT_LT(++steps, 10000);
    }
    EXPECT_GT(released, 1) << "the batch never drained between adds";
    for (size_t i = 0; i < t.sources.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "sentence " << i << " after release()";
  }
}

// Each sentence stops at its own limit (max_len_factor × its source + slack),
// whatever else is in the batch: finished sentences leave the batch while the
// others go on.
TEST(Decode, LengthLimitsArePerSentence) {
  const Trained& t = trained();
  const auto model = cpu_model(t.model);
  DecodeOptions free_run, limited;
  limited.max_len_factor = 0.4;
  for (int64_t beam : {0, 3}) {
    free_run.beam = limited.beam = beam;
    const Ids full = search_all(*model, t.sources, free_run);
    const Ids cut = search_all(*model, t.sources, limited);
    int truncated = 0;
    for (size_t i = 0; i < t.sources.size(); ++i) {
      const auto limit = static_cast<size_t>(target_limit(limited, static_cast<int64_t>(t.sources[i].size())));
      EXPECT_LT(limit, static_cast<size_t>(limited.max_len));
      ASSERT_LE(cut[i].size(), limit) << "sentence " << i << " beam " << beam;
      if (full[i].size() < limit) EXPECT_EQ(cut[i], full[i]) << "sentence " << i << " beam " << beam;
      // Counted as stopped at the limit exactly when it did not end by itself.
      const auto src_len = static_cast<int64_t>(t.sources[i].size());
      EXPECT_EQ(reached_limit(limited, model->shape().max_positions, src_len, static_cast<int64_t>(cut[i].size())),
                full[i].size() >= limit)
          << "sentence " << i << " beam " << beam;
      if (full[i].size() > limit) {
        ++truncated;
        if (beam == 0)  // greedy: the same tokens, cut short
          EXPECT_EQ(cut[i], std::vector<int64_t>(full[i].begin(), full[i].begin() + limit)) << "sentence " << i;
      }
      if (i % 9 == 0) EXPECT_EQ(search_all(*model, {t.sources[i]}, limited)[0], cut[i]) << "sentence " << i;
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

// An empty line gives an empty translation, greedy and beam, on the
// runtime's workers and LibTorch's, and leaves its batch-mates'
// translations as they are alone.
TEST(Decode, EmptyLinesGiveEmptyTranslations) {
  const Trained& t = trained();
  for (const auto& [name, model] : std::vector<std::pair<std::string, std::shared_ptr<const runtime::DecodingModel>>>{
           {"runtime", cpu_model(t.model)}, {"LibTorch", torch_model(copy_of(t.model), ops::AttentionBackend::kTorch)}}) {
    const runtime::Engine engine = engine_of(model, 2);
    for (const int64_t beam : {0, 3}) {
      SCOPED_TRACE(name + ", beam " + std::to_string(beam));
      DecodeOptions opts;
      opts.beam = beam;
      const TranslationBatch got = engine.translate({"", t.src_text[0], "", t.src_text[1]}, opts);
      const TranslationBatch alone = engine.translate({t.src_text[0], t.src_text[1]}, opts);
      ASSERT_EQ(got.translations.size(), 4u);
      EXPECT_EQ(got.translations[0], "");
      EXPECT_EQ(got.translations[2], "");
      EXPECT_TRUE(got.ids[0].empty() && got.ids[2].empty());
      EXPECT_EQ(got.translations[1], alone.translations[0]);
      EXPECT_EQ(got.translations[3], alone.translations[1]);
      EXPECT_FALSE(alone.translations[0].empty());
      EXPECT_EQ(engine.translate({""}, opts).translations, std::vector<std::string>{""});
    }
  }
}

TEST(Decode, BeamOneIsGreedyAndBeamsEndProperly) {
  const Trained& t = trained();
  const auto model = cpu_model(t.model);
  DecodeOptions greedy, beam1, beam4;
  beam1.beam = 1;  // the beam-search code path with one beam
  beam4.beam = 4;
  beam4.length_penalty = 0.6;
  const Ids g = search_all(*model, t.sources, greedy);
  EXPECT_EQ(g, search_all(*model, t.sources, beam1));
  const Ids b = search_all(*model, t.sources, beam4);
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
  using runtime::PlaceholderConstraint;
  const PlaceholderConstraint constraint({5, 6, -1, 7});
  ASSERT_TRUE(constraint.active());
  EXPECT_FALSE(PlaceholderConstraint({}).active());
  const std::vector<int64_t> owed0{5, 5, 6}, tok0{8, 5};  // owes 5 and 6 once more; 7 never
  const std::vector<int64_t> owed1{5}, tok1{5};           // done: no sentinel, <end> allowed
  const std::vector<int64_t> owed3{6, 7}, tok3{8, 9, 9};  // 2 missing, 2 tokens left: forced
  const std::vector<int64_t> owed4, tok4;                 // a source without placeholders
  const std::vector<PlaceholderConstraint::Row> rows{
      {&owed0, &tok0, 10}, {&owed1, &tok1, 10}, {}, {&owed3, &tok3, 5}, {&owed4, &tok4, 10}};
  const float inf = std::numeric_limits<float>::infinity();
  // Forbidden ids per row: -inf there, the score as it was elsewhere.
  const std::vector<std::vector<int64_t>> forbidden{{3, 7}, {5, 6, 7}, {}, {0, 1, 2, 3, 4, 5, 8, 9}, {5, 6, 7}};
  torch::manual_seed(6);
  const torch::Tensor before = torch::randn({5, 10}).contiguous();
  std::vector<float> scores(before.data_ptr<float>(), before.data_ptr<float>() + 50);
  constraint.apply(scores.data(), 10, rows);
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t v = 0; v < 10; ++v) {
      const bool off = std::count(forbidden[r].begin(), forbidden[r].end(), v) > 0;
      const float got = scores[static_cast<size_t>(r * 10 + v)];
      if (off) EXPECT_EQ(got, -inf) << "row " << r << " id " << v;
      else EXPECT_EQ(got, before[r][v].item<float>()) << "row " << r << " id " << v;
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
  const auto model = cpu_model(t.model);
  const std::vector<int64_t> fake{20, 21, 22};
  const Ids kinds{{}, {20}, {21, 21, 22}};
  Ids owed;
  for (size_t i = 0; i < t.sources.size(); ++i) owed.push_back(kinds[i % 3]);
  const auto counts_ok = [&](const std::vector<int64_t>& out, const std::vector<int64_t>& want) {
    for (int64_t id : fake)
      if (std::count(out.begin(), out.end(), id) != std::count(want.begin(), want.end(), id)) return false;
    return true;
  };
  DecodeOptions opts;
  opts.sentinel_ids = fake;
  opts.max_len_factor = 1.5;
  const Ids free_run = search_all(*model, t.sources, opts);  // no owed given: unconstrained
  int changed = 0;
  for (int64_t beam : {0, 4}) {
    opts.beam = beam;
    const Ids got = search_all(*model, t.sources, opts, owed);
    for (size_t i = 0; i < t.sources.size(); ++i) {
      EXPECT_TRUE(counts_ok(got[i], owed[i])) << "sentence " << i << " beam " << beam;
      if (beam == 0) changed += got[i] != free_run[i];
      if (beam == 0 && counts_ok(free_run[i], owed[i])) EXPECT_EQ(got[i], free_run[i]) << "sentence " << i;
    }
  }
  EXPECT_GE(changed, 30) << "the owed ids should change most translations";
  // Sentences joining a running batch get the fixed batch's constrained tokens.
  opts.beam = 0;
  const Ids alone = search_all(*model, t.sources, opts, owed);
  Search stream(model->new_state(), opts, model->shape().max_positions);
  std::map<uint64_t, std::vector<int64_t>> got;
  for (size_t i = 0; i < t.sources.size(); i += 7) {
    Ids srcs, ow;
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
    const Ids tight = search_all(*model, {t.sources[2], t.sources[5]}, opts, {kinds[2], kinds[2]});
    for (const auto& out : tight) {
      std::vector<int64_t> sorted = out;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, kinds[2]) << "beam " << beam;
    }
  }
}

}  // namespace
}  // namespace nmt
