// Prepared corpora (data/prepare.h, data/shards.h): the shard format round
// trip and its refusals of damaged files, the preparation's filters and
// counts, when a prepared corpus is reused, re-encoded or prepared again,
// the tokenizer sample, and the batches training reads from the shards:
// prefetched as synchronous, each rank its own share.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/prepare.h"
#include "data/shards.h"
#include "support/temp_dir.h"
#include "test_util.h"
#include "util/errors.h"
#include "util/sha256.h"

namespace nmt {
namespace {

namespace fs = std::filesystem;
using data::PreparedCorpus;
using data::ShardWriter;
using testing::slurp;

// Random pairs of ids below `vocab`: lengths 1..40 and 1..30.
ParallelCorpus random_pairs(int n, int64_t vocab, uint64_t seed) {
  ParallelCorpus c;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> s(1 + rng() % 40), t(1 + rng() % 30);
    for (auto& x : s) x = 4 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab - 4));
    for (auto& x : t) x = 4 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab - 4));
    c.src.push_back(s), c.tgt.push_back(t);
  }
  return c;
}

void write_corpus(const std::string& dir, const ParallelCorpus& c, uint32_t id_bytes, int64_t per_shard) {
  fs::create_directories(dir);
  ShardWriter w(dir, id_bytes, per_shard);
  for (int64_t i = 0; i < c.size(); ++i) {
    const std::vector<int32_t> s(c.src[i].begin(), c.src[i].end()), t(c.tgt[i].begin(), c.tgt[i].end());
    w.add(s.data(), s.size(), t.data(), t.size());
  }
  w.finish();
}

std::vector<int64_t> ids_of(const TokenPairs& p, int64_t i, bool source) {
  std::vector<int64_t> v(static_cast<size_t>(source ? p.src_length(i) : p.tgt_length(i)));
  source ? p.src_ids(i, v.data()) : p.tgt_ids(i, v.data());
  return v;
}

TEST(Shards, RoundTripInSixteenAndThirtyTwoBitIds) {
  for (const auto& [id_bytes, vocab] : {std::pair{2u, int64_t{65536}}, std::pair{4u, int64_t{100000}}}) {
    const ParallelCorpus c = random_pairs(1000, vocab, id_bytes);
    const std::string dir = testing::temp_dir("shards_" + std::to_string(id_bytes));
    write_corpus(dir, c, id_bytes, 300);  // four shards, the last one partial
    const PreparedCorpus p(dir, vocab, vocab);
    ASSERT_EQ(p.size(), 1000);
    EXPECT_EQ(p.shards(), 4);
    for (int64_t i = 0; i < p.size(); ++i) {
      ASSERT_EQ(p.src_length(i), c.src_length(i)) << i;
      ASSERT_EQ(p.tgt_length(i), c.tgt_length(i)) << i;
      ASSERT_EQ(ids_of(p, i, true), c.src[i]) << i;
      ASSERT_EQ(ids_of(p, i, false), c.tgt[i]) << i;
    }
    // A batch plan and batches read from the shards are those of the same pairs in memory.
    std::mt19937_64 a(9), b(9);
    const BatchPlan from_shards = plan_batches(p, 300, 0, a), in_memory = plan_batches(c, 300, 0, b);
    ASSERT_EQ(from_shards, in_memory);
    EXPECT_TRUE(make_batch(p, from_shards[3]).tgt_out.equal(make_batch(c, in_memory[3]).tgt_out));
  }
}

// The counting sort of the lengths gives what a stable sort by (target,
// source) length of the shuffled order gives: the plans of earlier versions.
TEST(Shards, BatchPlanOrdersAsAStableSortWould) {
  const ParallelCorpus c = random_pairs(3000, 500, 4);
  std::mt19937_64 rng(11), same(11);
  const BatchPlan plan = plan_batches(c, 400, 0, rng);
  std::vector<int64_t> order(3000);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), same);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return std::make_pair(c.tgt[x].size(), c.src[x].size()) < std::make_pair(c.tgt[y].size(), c.src[y].size());
  });
  std::vector<int64_t> joined;
  std::vector<size_t> firsts;
  for (size_t k = 0; k < plan.size(); ++k) firsts.push_back(static_cast<size_t>(plan[k][0]));
  // Every batch is a run of the sorted order.
  std::vector<size_t> where(3000);
  for (size_t k = 0; k < order.size(); ++k) where[static_cast<size_t>(order[k])] = k;
  for (size_t k = 0; k < plan.size(); ++k) {
    const std::vector<int64_t> b = plan[k];
    for (size_t r = 1; r < b.size(); ++r) ASSERT_EQ(where[b[r]], where[b[r - 1]] + 1) << "batch " << k;
  }
}

// Damaged files are refused with one line naming the file.
void expect_refused(const std::string& dir, const std::string& file, const std::string& says) {
  try {
    const PreparedCorpus p(dir, 65536, 65536);
    std::vector<int64_t> buf(100);
    for (int64_t i = 0; i < p.size(); ++i) p.src_ids(i, buf.data()), p.tgt_ids(i, buf.data());
    ADD_FAILURE() << "accepted: " << file << " (" << says << ")";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(dir + "/" + file + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(says), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(Shards, DamagedFilesAreRefusedNamingTheFile) {
  const ParallelCorpus c = random_pairs(200, 1000, 5);
  const std::string base = testing::temp_dir("damaged");
  int n = 0;
  const auto fresh = [&] {
    const std::string dir = base + "/" + std::to_string(n++);
    write_corpus(dir, c, 2, 100);
    return dir;
  };
  const auto patch = [](const std::string& path, size_t at, const std::string& bytes) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  std::string dir = fresh();
  fs::resize_file(dir + "/shard-00001.bin", fs::file_size(dir + "/shard-00001.bin") - 3);
  expect_refused(dir, "shard-00001.bin", "truncated");
  dir = fresh();
  patch(dir + "/shard-00000.bin", 0, "NOTSHARD");
  expect_refused(dir, "shard-00000.bin", "wrong magic");
  dir = fresh();
  patch(dir + "/index.bin", 8, std::string("\x02\0\0\0", 4));
  expect_refused(dir, "index.bin", "format version 2");
  dir = fresh();
  fs::remove(dir + "/shard-00001.bin");
  expect_refused(dir, "shard-00001.bin", "cannot open");
  dir = fresh();
  fs::rename(dir + "/shard-00000.bin", dir + "/x"), fs::rename(dir + "/shard-00001.bin", dir + "/shard-00000.bin");
  fs::rename(dir + "/x", dir + "/shard-00001.bin");
  expect_refused(dir, "shard-00000.bin", "says shard 0 holds");
  dir = fresh();
  // A pair's offsets that disagree with the index: found when it is read.
  patch(dir + "/shard-00000.bin", 64 + 4 * 5, std::string("\xff\0\0\0", 4));
  expect_refused(dir, "shard-00000.bin", "offsets disagree");
  dir = fresh();
  // An id beyond the vocabulary (shards of other tokenizers): found when read.
  const PreparedCorpus small(dir, 10, 10);
  std::vector<int64_t> buf(100);
  try {
    small.src_ids(0, buf.data());
    ADD_FAILURE() << "an id beyond the vocabulary was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("outside the source vocabulary of 10"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------ preparation

void write_text(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& l : lines) out << l << '\n';
}

// A config for a small corpus in `dir` (tokenizers of 60 pieces: milliseconds to train).
Config small_config(const std::string& dir) {
  Config cfg;
  cfg.data.train_src = dir + "/train.zh";
  cfg.data.train_tgt = dir + "/train.en";
  cfg.data.prepared_dir = dir + "/prepared";
  cfg.tokenizer.src_vocab_size = 60;
  cfg.tokenizer.tgt_vocab_size = 60;
  cfg.tokenizer.sample_lines = 1000;
  cfg.data.max_len = 20;
  return cfg;
}

void write_small_corpus(const std::string& dir, int n) {
  std::vector<std::string> zh, en;
  for (int i = 0; i < n; ++i) {
    zh.push_back("猫 " + std::to_string(i % 37) + " 狗 " + std::to_string(i % 7));  // 259 distinct pairs
    en.push_back("cat " + std::to_string(i % 37) + " dog " + std::to_string(i % 7));
  }
  write_text(dir + "/train.zh", zh);
  write_text(dir + "/train.en", en);
}

TEST(Prepare, FiltersAreCountedAndReported) {
  const std::string dir = testing::temp_dir("prepare_filters");
  std::vector<std::string> zh, en;
  for (int i = 0; i < 300; ++i) zh.push_back("猫 " + std::to_string(i)), en.push_back("cat " + std::to_string(i));
  zh.push_back(""), en.push_back("empty source");                           // empty
  zh.push_back("猫"), en.push_back("");                                     // empty
  std::string many;
  for (int k = 0; k < 40; ++k) many += "猫 ";
  zh.push_back(many), en.push_back("long");                                // over max_len (a piece per 猫 at least)
  zh.push_back("猫 1"), en.push_back("cat 1");                              // a duplicate of pair 1
  zh.push_back("猫"), en.push_back("cat cat cat cat cat cat cat cat");      // ratio: 8 pieces or more for 1 or 2
  zh.push_back("bad \xC3\x28"), en.push_back("bad");                        // not UTF-8
  write_text(dir + "/train.zh", zh);
  write_text(dir + "/train.en", en);
  Config cfg = small_config(dir);
  cfg.data.dedupe = true;
  cfg.data.max_length_ratio = 3;
  cfg.data.max_len = 30;
  // Not text: an error naming file and line, unless skipping is asked for.
  try {
    data::prepare_corpus(cfg);
    ADD_FAILURE() << "a line that is not UTF-8 was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir + "/train.zh:306: not valid UTF-8 (byte 5)", 0), 0u) << e.what();
  }
  EXPECT_FALSE(fs::exists(data::prepared_dir_for(cfg) + ".tmp"));  // nothing staged is left
  cfg.data.skip_invalid_lines = true;
  const data::PrepareReport r = data::prepare_corpus(cfg);
  EXPECT_EQ(r.lines, 306);
  EXPECT_EQ(r.invalid, 1);
  EXPECT_EQ(r.empty, 2);
  EXPECT_EQ(r.too_long, 1);
  EXPECT_EQ(r.duplicates, 1);
  EXPECT_EQ(r.ratio, 1);
  EXPECT_EQ(r.pairs, 300);
  EXPECT_EQ(r.pairs + r.empty + r.too_long + r.duplicates + r.ratio + r.invalid, r.lines);
  EXPECT_NE(r.summary().find("300 of 306 pairs kept"), std::string::npos) << r.summary();
  EXPECT_EQ(r.id_bytes, 2);
  const Tokenizer zt(r.src_model), et(r.tgt_model);
  const PreparedCorpus p(r.dir, zt.vocab_size(), et.vocab_size());
  EXPECT_EQ(p.size(), 300);
  EXPECT_EQ(ids_of(p, 7, true), zt.encode("猫 7"));  // the pairs in file order
  EXPECT_EQ(ids_of(p, 7, false), et.encode("cat 7"));
}

TEST(Prepare, LineCountsThatDifferNameBothFiles) {
  const std::string dir = testing::temp_dir("prepare_counts");
  write_text(dir + "/train.zh", {"猫", "狗", "鱼"});
  write_text(dir + "/train.en", {"cat", "dog"});
  try {
    data::prepare_corpus(small_config(dir));
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir + "/train.zh: has 3 lines but " + dir + "/train.en has 2", 0), 0u)
        << e.what();
  }
}

TEST(Prepare, ReusedWhileFreshPreparedAgainWhenStale) {
  const std::string dir = testing::temp_dir("prepare_fresh");
  write_small_corpus(dir, 400);
  Config cfg = small_config(dir);
  const data::PrepareReport first = data::prepare_corpus(cfg);
  EXPECT_FALSE(first.reused);
  EXPECT_EQ(first.reason, "no prepared corpus yet");
  EXPECT_TRUE(first.tokenizers_trained);
  const std::string model = slurp(first.src_model), first_tgt = slurp(first.tgt_model);

  const data::PrepareReport again = data::prepare_corpus(cfg);
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.pairs, first.pairs);
  EXPECT_EQ(again.lines, first.lines);

  // Only a filter changed: re-encoded with the same tokenizers.
  cfg.data.dedupe = true;
  const data::PrepareReport filtered = data::prepare_corpus(cfg);
  EXPECT_FALSE(filtered.reused);
  EXPECT_FALSE(filtered.tokenizers_trained);
  EXPECT_NE(filtered.reason.find("the data filters changed"), std::string::npos) << filtered.reason;
  EXPECT_EQ(slurp(filtered.src_model), model);
  EXPECT_EQ(filtered.pairs, 259);
  EXPECT_EQ(filtered.duplicates, 400 - 259);

  // A tokenizer setting changed: trained again.
  cfg.tokenizer.src_vocab_size = 61;
  const data::PrepareReport retrained = data::prepare_corpus(cfg);
  EXPECT_TRUE(retrained.tokenizers_trained);
  EXPECT_EQ(retrained.reason, "the tokenizer settings changed");

  // The same content under a new time: reused (its checksum says so), and
  // the manifest learns the time.
  ASSERT_TRUE(data::prepare_corpus(cfg).reused);
  struct utimbuf later {1800000000, 1800000000};
  ASSERT_EQ(::utime(cfg.data.train_tgt.c_str(), &later), 0);
  EXPECT_TRUE(data::prepare_corpus(cfg).reused);
  EXPECT_NE(slurp(retrained.dir + "/manifest.json").find("1800000000000000000"), std::string::npos);

  // Other content: prepared again, saying which file.
  write_small_corpus(dir, 401);
  const data::PrepareReport changed = data::prepare_corpus(cfg);
  EXPECT_FALSE(changed.reused);
  EXPECT_NE(changed.reason.find(cfg.data.train_src.substr(cfg.data.train_src.rfind('/')) + " changed"), std::string::npos)
      << changed.reason;
  EXPECT_EQ(changed.lines, 401);

  // Given tokenizers (a resumed run's): the corpus is encoded with them.
  const std::string other_src = model, other_tgt = first_tgt;
  data::PrepareOptions given;
  given.src_model = &other_src, given.tgt_model = &other_tgt;
  const data::PrepareReport resumed = data::prepare_corpus(cfg, given);
  EXPECT_EQ(resumed.reason, "its tokenizers are not the run's");
  EXPECT_EQ(slurp(resumed.src_model), other_src);
  EXPECT_TRUE(data::prepare_corpus(cfg, given).reused);

  // A damaged prepared corpus is an error naming the file, not silently redone.
  fs::resize_file(resumed.dir + "/index.bin", 70);
  try {
    data::prepare_corpus(cfg, given);
    ADD_FAILURE() << "a truncated index was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(resumed.dir + "/index.bin: truncated", 0), 0u) << e.what();
  }
  data::PrepareOptions force = given;
  force.force = true;
  EXPECT_FALSE(data::prepare_corpus(cfg, force).reused);
  EXPECT_TRUE(data::prepare_corpus(cfg, given).reused);
}

// The tokenizers' sample: at most tokenizer.sample_lines pairs, the same
// ones every time (so the same tokenizers), spread over the whole corpus.
TEST(Prepare, TheTokenizerSampleIsBoundedAndDeterministic) {
  const std::string a = testing::temp_dir("sample_a"), b = testing::temp_dir("sample_b");
  write_small_corpus(a, 5000);
  write_small_corpus(b, 5000);
  const data::PrepareReport ra = data::prepare_corpus(small_config(a));
  const data::PrepareReport rb = data::prepare_corpus(small_config(b));
  EXPECT_EQ(ra.sampled, 1000);
  // The same pieces (the model files differ only in the sample's path they record).
  const auto pieces = [](const std::string& model) {
    const Tokenizer t(model);
    std::vector<int64_t> ids(static_cast<size_t>(t.vocab_size()));
    std::iota(ids.begin(), ids.end(), 0);
    return t.pieces(ids);
  };
  EXPECT_EQ(pieces(ra.src_model), pieces(rb.src_model));
  EXPECT_EQ(pieces(ra.tgt_model), pieces(rb.tgt_model));
  Config all = small_config(a);
  all.tokenizer.sample_lines = 100000;
  EXPECT_EQ(data::prepare_corpus(all).sampled, 5000);  // a corpus smaller than the sample: all of it
}

// ------------------------------------------------------------ batches

TEST(Prepare, PrefetchedBatchesAreTheSynchronousOnes) {
  const ParallelCorpus c = random_pairs(700, 1000, 8);
  const std::string dir = testing::temp_dir("prefetch");
  write_corpus(dir, c, 2, 250);
  const PreparedCorpus p(dir, 1000, 1000);
  BatchSource sync(p, 500, 0, 3), ahead(p, 500, 0, 3);
  sync.seek({1, 2}), ahead.seek({1, 2});
  PrefetchingSource prefetch(ahead, 3);
  for (int k = 0; k < 3 * sync.batches_in_epoch(); ++k) {
    const StepBatch x = sync.next(), y = prefetch.next();
    ASSERT_EQ(x.position, y.position) << k;
    ASSERT_EQ(x.next, y.next) << k;
    ASSERT_EQ(x.global_tokens, y.global_tokens) << k;
    ASSERT_TRUE(x.batch.src.equal(y.batch.src)) << k;
    ASSERT_TRUE(x.batch.tgt_out.equal(y.batch.tgt_out)) << k;
  }
}

// Ranks read only their rows of each global batch: over an epoch the shares
// are disjoint, and together every pair once.
TEST(Prepare, RankSharesAreDisjointAndComplete) {
  ParallelCorpus c = random_pairs(500, 1000, 12);
  for (int64_t i = 0; i < c.size(); ++i) c.src[i][0] = 4 + i;  // row i carries its number
  const std::string dir = testing::temp_dir("ranks");
  write_corpus(dir, c, 2, 200);
  const PreparedCorpus p(dir, 1000, 1000);
  std::vector<int> seen(500, 0);
  std::vector<BatchSource> ranks;
  for (int r = 0; r < 3; ++r) ranks.emplace_back(p, 400, 0, 5, r, 3);
  for (int64_t b = 0; b < ranks[0].batches_in_epoch(); ++b)
    for (auto& rank : ranks) {
      const StepBatch s = rank.next();
      for (int64_t row = 0; row < s.batch.src.size(0); ++row) ++seen[s.batch.src[row][0].item<int64_t>() - 4];
    }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 500);
}

}  // namespace
}  // namespace nmt
