// The translation runtime (runtime/): model.safetensors read and refused,
// the weights the runtime reads against LibTorch's model, nmt::Translator
// from several threads at once, and what the runtime alone (no LibTorch
// lent, as in a program that links only nmt::runtime) opens and refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "data/dataset.h"
#include "decode/torch_decoding.h"
#include "model/build.h"
#include "model/parameter_table.h"
#include "nmt/translator.h"
#include "runtime/cpu_model.h"
#include "runtime/safetensors.h"
#include "runtime/translator_impl.h"
#include "support/runtime_models.h"
#include "support/temp_dir.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint_writer.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace nmt {
namespace {

namespace fs = std::filesystem;

// A small model that has learnt 40 toy pairs, saved as a checkpoint, and
// the lines and references it learnt.
struct Saved {
  std::string dir;
  Transformer model{nullptr};
  std::vector<std::string> zh, en;
};

const Saved& saved() {
  static const Saved s = [] {
    Saved s;
    const auto& paths = testing::toy_tokenizers();
    const Tokenizer zh(paths.src_model), en(paths.tgt_model);
    const ParallelCorpus all = load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), zh, en, 64);
    ParallelCorpus c;
    for (int i = 0; i < 40; ++i) {
      c.src.push_back(all.src[i]), c.tgt.push_back(all.tgt[i]);
      s.zh.push_back(all.src_text[i]), s.en.push_back(all.tgt_text[i]);
    }
    Config cfg = testing::tiny_config();
    cfg.model.d_model = 64;
    cfg.model.ff_dim = 128;
    cfg.decode.max_len = 40;
    cfg.train.threads = 2;
    torch::manual_seed(0);
    s.model = build_model(cfg, zh.vocab_size(), en.vocab_size());
    std::vector<int64_t> idx(40);
    std::iota(idx.begin(), idx.end(), 0);
    testing::train_steps(s.model, make_batch(c, idx), 150, 3e-3);
    s.model->eval();
    s.dir = testing::temp_dir("runtime") + "/last";
    save_checkpoint(s.dir, s.model, nullptr, TrainingState{}, cfg, paths.src_model, paths.tgt_model);
    return s;
  }();
  return s;
}

// The runtime without LibTorch's help for as long as it lives, as in a
// program that links nmt::runtime alone.
struct RuntimeAlone {
  RuntimeAlone() { runtime::install_torch_support({}); }
  ~RuntimeAlone() { install_torch_runtime(); }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// Every tensor of a well-formed file comes back as written; each way a file
// can be damaged is an InputError naming the file and what is wrong.
TEST(Safetensors, RoundTripAndDamage) {
  const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{-1.5f};
  const std::string bytes = runtime::write_safetensors({{"a", {{2, 3}, a.data()}}, {"b", {{1}, b.data()}}},
                                                       {{"format", "nmt"}});
  const auto views = runtime::read_safetensors(bytes, "m.safetensors");
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views.at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(std::equal(a.begin(), a.end(), views.at("a").data));
  EXPECT_EQ(views.at("b").data[0], -1.5f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(views.at("a").data) % 4, 0u);

  // A file with the header `json` (padded so that data starts 8-byte
  // aligned, as writers do) over `data` bytes.
  const auto file = [](std::string json, size_t data) {
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
    return out + json + std::string(data, '\0');
  };
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {bytes.substr(0, 5), "not a safetensors file (5 bytes)"},
      {bytes.substr(0, 40), "header of"},
      {file("{\"a\": [", 0), "the header is not JSON"},
      {file("[1, 2]", 0), "the header is not a JSON object"},
      {file(R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})", 4), "tensor a: dtype \"F16\""},
      {file(R"({"a": {"dtype": "F32", "shape": [2]}})", 8), "tensor a: expected dtype, shape and data_offsets"},
      {file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", 8), "outside the 8 bytes"},
      {file(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8), "needs 12 bytes"},
      {file(R"({"a": {"dtype": "F32", "shape": [-3], "data_offsets": [0, 8]}})", 8), "holds a non-size"},
      {file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
            R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12),
       "two tensors' bytes overlap"},
  };
  for (const auto& [content, want] : damaged) {
    const std::string got = error_of([&] { runtime::read_safetensors(content, "m.safetensors"); });
    EXPECT_EQ(got.rfind("m.safetensors: ", 0), 0u) << got;
    EXPECT_NE(got.find(want), std::string::npos) << got;
  }
}

// The weights as the runtime reads them from model.safetensors are the
// model's: its teacher-forced log-probabilities are LibTorch's from
// model.pt (to float32's rounding), and it translates as the runtime does
// on the model's own tensors in memory. A weight read wrongly (another's
// bytes, transposed, a stale copy) changes both.
TEST(Runtime, ReadsTheWeightsLibTorchSaved) {
  const Saved& s = saved();
  TranslatorOptions o;
  o.compute_type = ComputeType::kFloat32;
  const Translator t(s.dir, o);
  ASSERT_NE(t.description().find("CPU runtime"), std::string::npos) << t.description();
  const auto got = t.score_batch(s.zh, s.en);
  const auto& paths = testing::toy_tokenizers();
  const Tokenizer zh(paths.src_model), en(paths.tgt_model);
  std::vector<std::vector<int64_t>> xs, ys;
  for (size_t i = 0; i < s.zh.size(); ++i) xs.push_back(zh.encode(s.zh[i])), ys.push_back(en.encode(s.en[i]));
  const auto want = testing::torch_model(load_checkpoint(s.dir, torch::kCPU).model, ops::AttentionBackend::kTorch)
                        ->score(xs, ys);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t k = 0; k < got[i].size(); ++k) worst = std::max(worst, std::abs(got[i][k] - want[i][k]));
  }
  EXPECT_LT(worst, 1e-4);
  TranslationOptions beam;
  beam.beam_size = 3;
  const auto translations = t.translate_batch(s.zh, beam);
  DecodeOptions opts = t.impl().decode_options(beam);
  const auto ids = testing::search_all(*testing::cpu_model(s.model), xs, opts);
  int learnt = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(translations[i].hypotheses[0], en.decode(ids[i])) << "line " << i;
    learnt += translations[i].hypotheses[0] == s.en[i];
  }
  EXPECT_GE(learnt, 20) << "the model should have learnt its pairs";
}

// A weight of another shape than the config gives it is refused, naming the
// file and the weight; so is a missing one.
TEST(Runtime, RefusesWeightsThatDoNotFitTheConfig) {
  const Saved& s = saved();
  const std::string bytes = read_file(s.dir + "/model.safetensors");
  auto tensors = runtime::read_safetensors(bytes, "model.safetensors");
  const ModelShape shape = model_shape(*s.model);
  const std::string name = "decoder_layers.1.ff1.weight";
  ASSERT_TRUE(tensors.count(name));
  tensors[name].shape = {tensors[name].shape[1], tensors[name].shape[0]};  // transposed
  const auto open = [&](const std::map<std::string, runtime::TensorView>& w) {
    runtime::CpuModel(shape, runtime::WeightSet{w, nullptr}, {}, "ck/model.safetensors");
  };
  std::string got = error_of([&] { open(tensors); });
  EXPECT_EQ(got.rfind("ck/model.safetensors: ", 0), 0u) << got;
  EXPECT_NE(got.find(name), std::string::npos) << got;
  tensors.erase(name);
  got = error_of([&] { open(tensors); });
  EXPECT_NE(got.find(name), std::string::npos) << got;
  EXPECT_NE(got.find("missing"), std::string::npos) << got;
}

// translate_batch from four threads at once on one Translator: each call
// gets what it gets alone, one call after another (greedy and beam,
// different lines, batch sizes and length limits side by side).
TEST(Translator, CallsFromFourThreadsGetWhatTheyGetAlone) {
  const Saved& s = saved();
  TranslatorOptions o;
  o.threads = 2;
  const Translator t(s.dir, o);
  std::vector<std::vector<std::string>> lines(4);
  std::vector<TranslationOptions> options(4);
  for (size_t i = 0; i < s.zh.size(); ++i) {
    lines[i % 4].push_back(s.zh[i]);
    lines[(i + 1) % 4].push_back(s.zh[(i * 7) % s.zh.size()] + s.zh[i]);  // longer, unsure
  }
  options[0].beam_size = 0;
  options[1].beam_size = 4, options[1].length_penalty = 0.6;
  options[2].beam_size = 0, options[2].max_batch_size = 3, options[2].max_decoding_length = 12;
  options[3].beam_size = 2, options[3].max_batch_size = 5;
  std::vector<std::vector<TranslationResult>> alone(4), together(4);
  for (size_t c = 0; c < 4; ++c) alone[c] = t.translate_batch(lines[c], options[c]);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> callers;
    for (size_t c = 0; c < 4; ++c)
      callers.emplace_back([&, c] { together[c] = t.translate_batch(lines[c], options[c]); });
    for (std::thread& th : callers) th.join();
    for (size_t c = 0; c < 4; ++c) {
      ASSERT_EQ(together[c].size(), alone[c].size());
      for (size_t i = 0; i < alone[c].size(); ++i) {
        EXPECT_EQ(together[c][i].hypotheses, alone[c][i].hypotheses) << "round " << round << ", call " << c << ", line " << i;
        EXPECT_EQ(together[c][i].length_limited, alone[c][i].length_limited);
      }
    }
  }
}

// The runtime alone opens a checkpoint from model.safetensors and
// translates as with LibTorch lent; what needs LibTorch (a GPU, LibTorch's
// attention, a checkpoint saved before model.safetensors) is a one-line
// error saying what to do.
TEST(Translator, TheRuntimeAloneOpensWhatItCanAndSaysWhatItCannot) {
  const Saved& s = saved();
  const std::vector<std::string> lines(s.zh.begin(), s.zh.begin() + 6);
  const auto with_torch = Translator(s.dir).translate_batch(lines);
  // A checkpoint saved before model.safetensors: model.pt only.
  const std::string old = testing::temp_dir("runtime_old") + "/last";
  fs::copy(s.dir, old);
  fs::remove(old + "/model.safetensors");
  write_manifest(old, {"model.pt", "state.yaml", "config.yaml", "src.model", "tgt.model"});
  {
    // With LibTorch lent, it opens through model.pt and says how to convert.
    const Translator t(old);
    EXPECT_NE(t.impl().note.find("nmt convert " + old), std::string::npos) << t.impl().note;
    const auto got = t.translate_batch(lines);
    for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(got[i].hypotheses, with_torch[i].hypotheses);
  }
  const RuntimeAlone alone;
  const auto got = Translator(s.dir).translate_batch(lines);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(got[i].hypotheses, with_torch[i].hypotheses) << "line " << i;
  EXPECT_EQ(error_of([&] { Translator t(old); }),
            old + "/model.safetensors: missing (the checkpoint was saved before nmt wrote its weights in a form read "
                  "without LibTorch): run `nmt convert " + old + "` once, which adds it");
  TranslatorOptions o;
  o.device = Device::kCuda;
  EXPECT_EQ(error_of([&] { Translator t(s.dir, o); }).rfind("device: cuda needs the nmt program", 0), 0u);
  o.device = Device::kAuto;
  EXPECT_EQ(Translator(s.dir, o).impl().device, Device::kCpu);
  o.device.reset();
  o.attention = AttentionBackend::kTorch;
  o.compute_type = ComputeType::kFloat32;
  EXPECT_EQ(error_of([&] { Translator t(s.dir, o); }).rfind("attention torch needs the nmt program", 0), 0u);
}

}  // namespace
}  // namespace nmt
