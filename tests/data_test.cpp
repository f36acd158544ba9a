// The data path (data/): text input line by line, batches with their
// masks, batch plans, and BatchSource, which serves each rank its share of
// every global batch in a resumable order.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <sstream>

#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/text_io.h"
#include "ops/attention/attention.h"
#include "util/errors.h"

namespace nmt {
namespace {

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
  const BatchPlan plan = plan_batches(c, 200, 0, rng);
  std::multiset<int64_t> seen;
  for (size_t k = 0; k < plan.size(); ++k) {
    const std::vector<int64_t> b = plan[k];
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

}  // namespace
}  // namespace nmt
