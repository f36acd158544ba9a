#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "data/dataset.h"
#include "data/text_io.h"
#include "model/transformer.h"
#include "ops/attention/attention.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"

namespace nmt {
namespace {

TEST(Tokenizer, RoundTripChineseAndEnglish) {
  const auto& paths = testing::toy_tokenizers();
  const Tokenizer zh(paths.src_model), en(paths.tgt_model);
  for (const std::string s : {"我爱水课", "他昨天在公园看见了一只狗", "你喜欢猫吗？"})
    EXPECT_EQ(zh.decode(zh.encode(s)), s);
  for (const std::string s : {"I love easy courses", "do you like cats ?", "she saw three dogs"})
    EXPECT_EQ(en.decode(en.encode(s)), s);
  const auto pieces = en.pieces({kPadId, kUnkId, kStartId, kEndId});
  EXPECT_EQ(pieces, (std::vector<std::string>{"<pad>", "<unk>", "<start>", "<end>"}));
  // Specials never come out of encode and are dropped by decode.
  for (int64_t id : en.encode("I love easy courses")) EXPECT_GT(id, kEndId);
  EXPECT_EQ(en.decode({kStartId, kEndId, kPadId}), "");
}

// Small corpora so that training the tokenizers takes milliseconds.
void write_lines(const std::string& path, const std::string& word, int n) {
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) out << word << i % 37 << " " << word << "\n";
}

TEST(Tokenizer, ReusesCachedModelsAndRetrainsWhenDataOrSettingsChange) {
  const std::string dir = testing::temp_dir("tok_cache");
  write_lines(dir + "/a.zh", "猫", 300);
  write_lines(dir + "/a.en", "cat", 300);
  TokenizerConfig tc;
  tc.cache_dir = dir + "/cache";
  tc.src_vocab_size = tc.tgt_vocab_size = 60;
  const TokenizerPaths first = prepare_tokenizers(tc, dir + "/a.zh", dir + "/a.en");
  EXPECT_TRUE(first.trained);
  const TokenizerPaths again = prepare_tokenizers(tc, dir + "/a.zh", dir + "/a.en");
  EXPECT_FALSE(again.trained);  // nothing was trained: the cached models were used
  EXPECT_EQ(again.src_model, first.src_model);
  tc.src_vocab_size = 61;       // other settings: other models
  const TokenizerPaths other = prepare_tokenizers(tc, dir + "/a.zh", dir + "/a.en");
  EXPECT_TRUE(other.trained);
  EXPECT_NE(other.src_model, first.src_model);
  tc.src_vocab_size = 60;
  write_lines(dir + "/a.en", "dog", 300);  // other data: other models
  EXPECT_TRUE(prepare_tokenizers(tc, dir + "/a.zh", dir + "/a.en").trained);
}

ParallelCorpus two_pairs() {
  ParallelCorpus c;
  c.src = {{10, 11, 12}, {20}};
  c.tgt = {{30, 31}, {40, 41, 42, 43}};
  return c;
}

// All lines of text as nmt translate reads its input: `chunk` lines at a time.
std::vector<std::string> read_in_chunks(const std::string& text, size_t chunk) {
  std::istringstream in(text);
  LineReader reader(in, "in.txt");
  std::vector<std::string> all;
  for (;;) {
    const std::vector<std::string> lines = reader.next(chunk, 0, "");
    if (lines.empty()) return all;
    EXPECT_LE(lines.size(), chunk);
    all.insert(all.end(), lines.begin(), lines.end());
  }
}

TEST(LineReader, ReadsWhatSplitLinesReads) {
  for (const std::string text : {"", "a\nb", "a\r\nb\r\n", "\xEF\xBB\xBFx\n\xEF\xBB\xBFy\n", "\r", "\n\n",
                                 "\xEF\xBB\xBF\r", "\xEF\xBB\xBF\n",
                                 // Found by tests/fuzz/fuzz_translate: only a BOM
                                 // was read as one empty line (split_lines: none).
                                 "\xEF\xBB\xBF"})
    for (size_t chunk : {1, 2, 16})
      EXPECT_EQ(read_in_chunks(text, chunk), split_lines(text, "in.txt")) << "chunk " << chunk << ": " << text;
}

TEST(LineReader, NamesTheBadLineAndWhatWasTranslated) {
  std::istringstream in("ok\r\nbad \xC3\x28\n");
  LineReader reader(in, "in.txt");
  EXPECT_EQ(reader.next(1, 0, ""), std::vector<std::string>{"ok"});
  try {
    reader.next(5, 1, "out.txt");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "in.txt:2: not valid UTF-8 (byte 5); 1 lines were translated before it (out.txt not written)");
  }
}

// A NUL is valid UTF-8, but the tokenizer takes C strings and would read
// the line only up to it: both readers refuse it, naming line and byte.
TEST(TextInput, ANulByteIsRefusedByEveryReader) {
  const std::string text = std::string("ok\nab") + '\0' + "cd\n";
  try {
    split_lines(text, "in.txt");
    ADD_FAILURE() << "split_lines accepted a NUL";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "in.txt:2: contains a NUL byte (byte 3)");
  }
  std::istringstream in(text);
  LineReader reader(in, "in.txt");
  try {
    reader.next(5, 0, "");
    ADD_FAILURE() << "LineReader accepted a NUL";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "in.txt:2: contains a NUL byte (byte 3); 0 lines were translated before it (and written to stdout)");
  }
}

TEST(Batch, TeacherForcingShift) {
  const Batch b = make_batch(two_pairs(), {0, 1});
  // decoder input <start> y1..yn, labels y1..yn <end>; source carries neither.
  EXPECT_TRUE(b.src.equal(torch::tensor({10, 11, 12, 20, 0, 0}, torch::kLong).view({2, 3})));
  EXPECT_TRUE(b.tgt_in.equal(
      torch::tensor({2, 30, 31, 0, 0, 2, 40, 41, 42, 43}, torch::kLong).view({2, 5})));
  EXPECT_TRUE(b.tgt_out.equal(
      torch::tensor({30, 31, 3, 0, 0, 40, 41, 42, 43, 3}, torch::kLong).view({2, 5})));
  EXPECT_TRUE(b.src_lengths.equal(torch::tensor({3, 1}, torch::kLong)));
  EXPECT_TRUE(b.tgt_lengths.equal(torch::tensor({3, 5}, torch::kLong)));
  EXPECT_EQ(b.tokens, 8);
}

TEST(Batch, PaddingAndCausalMasks) {
  ops::AttentionOptions opts;
  opts.key_lengths = torch::tensor({3, 1}, torch::kLong);
  const auto pad = ops::visibility_mask(2, 2, 4, opts, torch::TensorOptions());
  EXPECT_TRUE(pad.equal(torch::tensor({1, 1, 1, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0}, torch::kBool)
                            .view({2, 1, 2, 4})));
  opts.causal = true;
  const auto both = ops::visibility_mask(2, 3, 3, opts, torch::TensorOptions());
  // row i sees j <= i and j < length
  EXPECT_TRUE(both.equal(torch::tensor({1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0},
                                       torch::kBool)
                             .view({2, 1, 3, 3})));
}

TEST(Batch, PlanCoversEveryPairOnceWithinBudget) {
  ParallelCorpus c;
  std::mt19937_64 gen(3);
  for (int i = 0; i < 500; ++i) {
    c.src.emplace_back(1 + gen() % 20, 5);
    c.tgt.emplace_back(1 + gen() % 20, 6);
  }
  std::mt19937_64 rng(7);
  const auto plan = plan_batches(c, 200, 0, rng);
  std::multiset<int64_t> seen;
  for (const auto& b : plan) {
    size_t s = 0, t = 0;
    for (int64_t i : b) s = std::max(s, c.src[i].size()), t = std::max(t, c.tgt[i].size() + 1);
    EXPECT_LE(b.size() * (s + t), 200u);
    seen.insert(b.begin(), b.end());
  }
  EXPECT_EQ(seen.size(), 500u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 500u);
  std::mt19937_64 rng2(7);
  EXPECT_EQ(plan_batches(c, 200, 0, rng2), plan);  // deterministic
}

}  // namespace
}  // namespace nmt
