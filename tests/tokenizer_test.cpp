// The SentencePiece tokenizers (tokenizer/): round trips on both sides,
// special ids, and the model cache that retrains only when the data or the
// settings change.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "data/placeholder_mask.h"
#include "support/temp_dir.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

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

// tokenizer.protect_placeholders: each sentinel is one piece on both sides,
// decodes to itself, and the setting is part of the cache key.
TEST(Tokenizer, ProtectedPlaceholdersAreSinglePieces) {
  const std::string dir = testing::temp_dir("tok_sentinels");
  write_lines(dir + "/a.zh", "猫", 300);
  write_lines(dir + "/a.en", "cat", 300);
  TokenizerConfig tc;
  tc.cache_dir = dir + "/cache";
  tc.src_vocab_size = tc.tgt_vocab_size = 80;
  const TokenizerPaths plain = prepare_tokenizers(tc, dir + "/a.zh", dir + "/a.en");
  tc.protect_placeholders = true;
  const TokenizerPaths paths = prepare_tokenizers(tc, dir + "/a.zh", dir + "/a.en");
  EXPECT_TRUE(paths.trained);
  EXPECT_NE(paths.src_model, plain.src_model);
  for (const auto& [model, word] : {std::pair{paths.src_model, std::string("猫")}, std::pair{paths.tgt_model, std::string("cat")}}) {
    const Tokenizer tok(model);
    for (int k : {1, 7, data::kMaxSentinels}) {
      const std::string line = word + "1 " + data::sentinel(k) + word + data::sentinel(1);
      const auto ids = tok.encode(line);
      EXPECT_EQ(tok.decode(ids), line) << model;
      // One piece each (after the word-start piece SentencePiece puts first).
      const auto pieces = tok.pieces(tok.encode(data::sentinel(k)));
      ASSERT_FALSE(pieces.empty());
      EXPECT_EQ(pieces.back(), data::sentinel(k)) << model << " sentinel " << k;
      EXPECT_LE(pieces.size(), 2u);
      // ... and the id decoding constraints look it up by.
      const int64_t id = tok.piece_id(data::sentinel(k));
      ASSERT_GE(id, 0) << model;
      EXPECT_EQ(tok.pieces({id}), std::vector<std::string>{data::sentinel(k)}) << model;
    }
    EXPECT_EQ(tok.piece_id("no-such-piece"), -1) << model;
  }
}

}  // namespace
}  // namespace nmt
