// The SentencePiece tokenizers (tokenizer/): round trips on both sides,
// special ids, and protected placeholders as single pieces. (When they are
// trained again: tests/prepare_test.cpp.)
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

// tokenizer.protect_placeholders: each sentinel is one piece on both sides,
// decodes to itself, and the setting is one of those the tokenizers depend on.
TEST(Tokenizer, ProtectedPlaceholdersAreSinglePieces) {
  const std::string dir = testing::temp_dir("tok_sentinels");
  write_lines(dir + "/a.zh", "猫", 300);
  write_lines(dir + "/a.en", "cat", 300);
  TokenizerConfig tc;
  tc.src_vocab_size = tc.tgt_vocab_size = 80;
  const std::string plain = tokenizer_settings(tc);
  tc.protect_placeholders = true;
  EXPECT_NE(tokenizer_settings(tc), plain);
  train_tokenizers(tc, dir + "/a.zh", dir + "/a.en", dir);
  const std::string src_model = dir + "/src.model", tgt_model = dir + "/tgt.model";
  for (const auto& [model, word] : {std::pair{src_model, std::string("猫")}, std::pair{tgt_model, std::string("cat")}}) {
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
