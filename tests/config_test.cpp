#include <gtest/gtest.h>

#include <fstream>

#include "config/config.h"
#include "test_util.h"
#include "util/errors.h"

namespace nmt {
namespace {

// The InputError message for a config text, or "" when it loads.
::testing::AssertionResult starts_with(const std::string& s, const std::string& prefix) {
  if (s.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << s << "' does not start with '" << prefix << "'";
}

std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "x.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsAndShippedConfigLoad) {
  EXPECT_EQ(error_of(""), "");
  const Config cfg = load_config(testing::source_dir() + "/configs/toy.yaml");
  EXPECT_EQ(cfg.attention.backend, AttentionBackend::kFlash);  // the toy trains with ours
  EXPECT_EQ(Config().attention.backend, AttentionBackend::kTorch);
  EXPECT_EQ(cfg.train.stop_at_bleu, 99.5);
  EXPECT_GT(cfg.model.d_model, 0);
}

// A key of earlier versions (a resumed run's config.yaml may hold one) is
// read and ignored, and never written again.
TEST(Config, RetiredKeysAreReadAndNotWritten) {
  EXPECT_EQ(error_of("tokenizer:\n  cache_dir: checkpoints/tokenizers\n"), "");
  Config cfg = parse_config("tokenizer:\n  cache_dir: x\n", "old.yaml");
  EXPECT_EQ(to_yaml(cfg).find("cache_dir"), std::string::npos);
  apply_override(cfg, "tokenizer.cache_dir=y");  // old command lines keep working
  EXPECT_EQ(error_of("tokenizer:\n  cache_dir: [a]\n"), "x.yaml:2: tokenizer.cache_dir: expected a scalar, got 'a list'");
  EXPECT_EQ(error_of("data:\n  max_length_ratio: -1\n"), "x.yaml:2: data.max_length_ratio: -1 is out of range [0, 1000]");
  EXPECT_EQ(error_of("tokenizer:\n  sample_lines: 10\n"),
            "x.yaml:2: tokenizer.sample_lines: 10 is out of range [1000, 1099511627776]");
}

TEST(Config, UnknownKeyNamesFileLineAndKey) {
  EXPECT_TRUE(starts_with(error_of("model:\n  d_model: 64\n  haeds: 4\n"), "x.yaml:3: model.haeds: unknown key"));
  EXPECT_TRUE(starts_with(error_of("modle:\n  d_model: 64\n"), "x.yaml:1: modle: unknown secti"));
}

TEST(Config, WrongTypeAndRange) {
  EXPECT_EQ(error_of("train:\n  lr: fast\n"), "x.yaml:2: train.lr: expected a number, got 'fast'");
  EXPECT_EQ(error_of("model:\n  heads: [1, 2]\n"),
            "x.yaml:2: model.heads: expected an integer, got 'a list'");
  EXPECT_EQ(error_of("model:\n  dropout: 1.5\n"), "x.yaml:2: model.dropout: 1.5 is out of range [0, 0.9]");
  EXPECT_EQ(error_of("attention:\n  backend: fast\n"),
            "x.yaml:2: attention.backend: 'fast' is not one of: torch | naive | flash");
  EXPECT_EQ(error_of("model:\n  tie_embeddings: maybe\n"),
            "x.yaml:2: model.tie_embeddings: expected true or false, got 'maybe'");
}

TEST(Config, CrossFieldCheckNamesTheKeyLine) {
  EXPECT_EQ(error_of("model:\n  d_model: 128\n  heads: 3\n"),
            "x.yaml:3: model.heads: 3 does not divide model.d_model 128");
}

TEST(Config, MovingAverageKeys) {
  EXPECT_EQ(error_of("train:\n  ema_decay: 0.9999\n  ema_step_dependent: true\n  keep_last: 5\n"), "");
  EXPECT_EQ(error_of("train:\n  ema_decay: 1\n"), "x.yaml:2: train.ema_decay: 1 is out of range [0, 1)");
  EXPECT_EQ(error_of("train:\n  ema_decay: -0.5\n"), "x.yaml:2: train.ema_decay: -0.5 is out of range [0, 1)");
  EXPECT_EQ(error_of("train:\n  ema_step_dependent: true\n"),
            "x.yaml:2: train.ema_step_dependent: true needs train.ema_decay > 0 (the average it adjusts)");
  EXPECT_EQ(error_of("train:\n  keep_last: -1\n"), "x.yaml:2: train.keep_last: -1 is out of range [0, 2147483647]");
  const Config cfg = parse_config("train:\n  ema_decay: 0.999\n", "x.yaml");
  EXPECT_EQ(parse_config(to_yaml(cfg), "again.yaml").train.ema_decay, 0.999);  // a checkpoint's config keeps it
}

// model.tie_all ties the source and target embeddings: one vocabulary or
// nothing (the key named, on its line); tokenizer.joint is read as
// tokenizer.shared and written as that.
TEST(Config, TieAllNeedsOneVocabularyAndJointIsShared) {
  EXPECT_EQ(error_of("model:\n  tie_all: true\n"),
            "x.yaml:2: model.tie_all: true ties the source and target embeddings: it needs one vocabulary "
            "(tokenizer.shared: true)");
  EXPECT_EQ(error_of("tokenizer:\n  shared: true\nmodel:\n  tie_embeddings: false\n  tie_all: true\n"),
            "x.yaml:5: model.tie_all: true ties the output projection too: model.tie_embeddings must not be false");
  EXPECT_EQ(error_of("tokenizer:\n  shared: true\nmodel:\n  tie_all: true\n"), "");
  const Config joint = parse_config("tokenizer:\n  joint: true\nmodel:\n  tie_all: true\n", "j.yaml");
  EXPECT_TRUE(joint.tokenizer.shared);
  EXPECT_TRUE(joint.model.tie_all);
  EXPECT_EQ(to_yaml(joint).find("joint"), std::string::npos);
  EXPECT_NE(to_yaml(joint).find("tie_all: true"), std::string::npos);
  EXPECT_EQ(error_of("tokenizer:\n  joint: maybe\n"), "x.yaml:2: tokenizer.joint: expected true or false, got 'maybe'");
  Config cfg;
  EXPECT_THROW(apply_override(cfg, "model.tie_all=true"), InputError);
  apply_overrides(cfg, {"model.tie_all=true", "tokenizer.joint=true"});
  EXPECT_TRUE(cfg.tokenizer.shared);
}

// A key and its alias together would leave the later one winning in
// silence: refused, naming both, in a file and on the command line. The
// same name twice on a command line stays allowed (the later wins).
TEST(Config, AKeyAndItsAliasTogetherAreRefused) {
  EXPECT_EQ(error_of("tokenizer:\n  joint: true\n  shared: false\n"),
            "x.yaml:3: tokenizer.shared: the same key as tokenizer.joint (x.yaml:2); give one of the two names");
  Config cfg;
  try {
    apply_overrides(cfg, {"tokenizer.joint=true", "tokenizer.shared=false"});
    ADD_FAILURE() << "a key and its alias were both accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--set tokenizer.shared=false: tokenizer.shared: the same key as tokenizer.joint "
                           "(--set tokenizer.joint=true); give one of the two names");
  }
  EXPECT_FALSE(cfg.tokenizer.shared);  // left as it was
  apply_overrides(cfg, {"tokenizer.shared=true", "tokenizer.shared=false"});
  EXPECT_FALSE(cfg.tokenizer.shared);
}

// decode.beam and decode.length_penalty: the decoding defaults a checkpoint
// carries (translate, evaluate, check-po, serve), validation stays greedy.
TEST(Config, DecodeBeamKeys) {
  EXPECT_EQ(error_of("decode:\n  beam: 65\n"), "x.yaml:2: decode.beam: 65 is out of range [0, 64]");
  EXPECT_EQ(error_of("decode:\n  length_penalty: -1\n"), "x.yaml:2: decode.length_penalty: -1 is out of range [0, 10]");
  const Config cfg = parse_config("decode:\n  beam: 4\n  length_penalty: 0.6\n", "x.yaml");
  const Config again = parse_config(to_yaml(cfg), "again.yaml");
  EXPECT_EQ(again.decode.beam, 4);
  EXPECT_EQ(again.decode.length_penalty, 0.6);
}

TEST(Config, InvalidYamlAndMissingFile) {
  EXPECT_TRUE(starts_with(error_of("model: [\n"), "x.yaml:2: invalid YA"));
  try {
    load_config("/nonexistent/cfg.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/cfg.yaml: cannot open config file: No such file or directory");
  }
}

// Found by tests/fuzz/fuzz_config: YAML allows lists, mappings and null as
// keys, and reading them as strings threw YAML::Exception, not InputError.
TEST(Config, NonScalarKeysAreInputErrors) {
  EXPECT_EQ(error_of("[model]: {}\n"), "x.yaml:1: expected a key name, got a list");
  EXPECT_EQ(error_of("~: 3\n"), "x.yaml:1: expected a key name, got nothing");
  EXPECT_EQ(error_of("model:\n  {d_model: 1}: 2\n"), "x.yaml:2: model: expected a key name, got a mapping");
  EXPECT_EQ(error_of("model:\n  ? [a, b]\n  : 1\n"), "x.yaml:2: model: expected a key name, got a list");
}

// Found by tests/fuzz/fuzz_config (as fuzz_checkpoint found it for state.yaml):
// yaml-cpp keeps bytes that are not UTF-8 but to_yaml() wrote them as U+FFFD,
// so a checkpoint's resolved config named another file; NUL likewise.
TEST(Config, TextThatIsNotUtf8IsRejected) {
  EXPECT_EQ(error_of("data:\n  train_src: a\xff.zh\n"), "x.yaml:2: not valid UTF-8 (byte 15)");
  // A NUL in a plain scalar came out of yaml-cpp as a stray byte 0xA0.
  EXPECT_EQ(error_of(std::string("data:\n  train_src: ab\0_cd\n", 25)), "x.yaml:2: NUL character (byte 16)");
  Config cfg;
  try {
    apply_override(cfg, "data.train_src=a\xff");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--set: not valid UTF-8 (byte 17)");
  }
  EXPECT_EQ(cfg.data.train_src, Config().data.train_src);
}

TEST(Config, OverridesAreValidated) {
  Config cfg;
  apply_override(cfg, "model.heads=8");
  EXPECT_EQ(cfg.model.heads, 8);
  apply_override(cfg, "attention.backend=flash");
  EXPECT_EQ(cfg.attention.backend, AttentionBackend::kFlash);
  EXPECT_THROW(apply_override(cfg, "model.heads=7"), InputError);
  EXPECT_EQ(cfg.model.heads, 8);  // a rejected override changes nothing
  EXPECT_THROW(apply_override(cfg, "model.nope=1"), InputError);
  EXPECT_THROW(apply_override(cfg, "noequals"), InputError);
  try {
    apply_override(cfg, "train.lr=abc");
    FAIL() << "train.lr=abc was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--set train.lr=abc: train.lr: expected a number, got 'abc'");
  }
}

TEST(Config, CrossKeyChecksRunAfterAllOverrides) {
  Config cfg;  // best_metric bleu needs BLEU sentences: valid in one order only, if checked per --set
  apply_overrides(cfg, {"train.valid_bleu_sentences=0", "train.best_metric=loss"});
  EXPECT_EQ(cfg.train.best_metric, "loss");
  Config other;
  EXPECT_THROW(apply_overrides(other, {"train.valid_bleu_sentences=0"}), InputError);
  EXPECT_EQ(other.train.valid_bleu_sentences, Config().train.valid_bleu_sentences);
}

// The resolved config says numbers as they were written: 0.1, not the 17
// digits of its double (0.10000000000000001), and reads them back exactly.
TEST(Config, ResolvedNumbersAreTheShortestThatReadBack) {
  Config cfg;
  apply_overrides(cfg, {"train.lr=0.0007", "train.adam_eps=1e-9"});
  const std::string yaml = to_yaml(cfg);
  for (const char* line : {"  dropout: 0.1\n", "  label_smoothing: 0.1\n", "  src_character_coverage: 0.9995\n",
                           "  lr: 0.0007\n", "  adam_eps: 1e-09\n", "  max_len_factor: auto\n"})
    EXPECT_NE(yaml.find(line), std::string::npos) << line << " not in\n" << yaml;
  EXPECT_EQ(yaml.find("00000000"), std::string::npos) << yaml;
  const Config again = parse_config(yaml, "resolved.yaml");
  EXPECT_EQ(again.train.lr, 0.0007);
  EXPECT_EQ(again.model.dropout, 0.1);
  EXPECT_EQ(again.train.adam_eps, 1e-9);
}

// decode.max_len_factor: a number, or auto (unset: derived from the
// training corpus, runtime/length_limit.h), the default.
TEST(Config, LengthFactorIsANumberOrAuto) {
  EXPECT_FALSE(Config().decode.max_len_factor.has_value());
  EXPECT_EQ(parse_config("decode:\n  max_len_factor: 3\n", "x.yaml").decode.max_len_factor, 3.0);
  EXPECT_FALSE(parse_config("decode:\n  max_len_factor: auto\n", "x.yaml").decode.max_len_factor.has_value());
  EXPECT_EQ(error_of("decode:\n  max_len_factor: fast\n"),
            "x.yaml:2: decode.max_len_factor: expected a number or auto, got 'fast'");
  EXPECT_EQ(error_of("decode:\n  max_len_factor: -1\n"),
            "x.yaml:2: decode.max_len_factor: -1 is out of range [0, 1000] (or auto)");
  Config cfg;
  apply_override(cfg, "decode.max_len_factor=2.5");
  EXPECT_NE(to_yaml(cfg).find("  max_len_factor: 2.5\n"), std::string::npos);
}

TEST(Config, ResolvedYamlRoundTrips) {
  Config cfg;
  apply_override(cfg, "model.d_model=96");
  apply_override(cfg, "data.train_src=some file.zh");
  const Config again = parse_config(to_yaml(cfg), "resolved.yaml");
  EXPECT_EQ(to_yaml(again), to_yaml(cfg));
  EXPECT_EQ(again.model.d_model, 96);
  EXPECT_EQ(again.data.train_src, "some file.zh");
}

}  // namespace
}  // namespace nmt
