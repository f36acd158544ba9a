// A prepared corpus on disk: token ids in binary shards, a length index and
// a manifest, written once by `nmt prepare` (data/prepare.h) and read by
// training through mmap, so that a corpus of millions of pairs costs the
// reader only its index in memory (4 bytes a pair) and the pages it touches.
//
//   DIR/manifest.json   what the shards were made from, and their counts
//   DIR/src.model       the SentencePiece models the ids are of
//   DIR/tgt.model
//   DIR/index.bin       header; first pair of each shard [S + 1] (uint64);
//                       source lengths [N], target lengths [N] (uint16)
//   DIR/shard-NNNNN.bin header; source and target offsets [n + 1] (uint32,
//                       in tokens); source ids, target ids (uint16 when
//                       both vocabularies have at most 65,536 pieces, else
//                       uint32), in pair order
//
// Every header is 64 bytes: an 8-byte magic ("NMTINDEX", "NMTSHARD"), the
// format version, then counts that must agree with the file's size, the
// index and the manifest. All numbers little-endian. Plain C++17 (no
// LibTorch): the readers of index and shard bytes are fuzzed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/token_pairs.h"

namespace nmt::data {

constexpr uint32_t kShardFormatVersion = 1;
constexpr const char* kCorpusManifest = "manifest.json";
constexpr const char* kCorpusIndex = "index.bin";
std::string shard_file_name(int64_t shard);  // "shard-00003.bin"

// What the index says, checked against its bytes.
struct IndexView {
  uint64_t pairs = 0, shards = 0, src_tokens = 0, tgt_tokens = 0;
  const uint64_t* shard_first = nullptr;  // [shards + 1]: shard s holds pairs [shard_first[s], shard_first[s + 1])
  const uint16_t* src_len = nullptr;      // [pairs]
  const uint16_t* tgt_len = nullptr;      // [pairs]
};
// InputError "NAME: ..." when `data` is not a complete index of this version.
IndexView parse_index(const uint8_t* data, size_t size, const std::string& name);

struct ShardView {
  uint64_t shard = 0, first_pair = 0, pairs = 0, src_tokens = 0, tgt_tokens = 0;
  uint32_t id_bytes = 0;
  const uint32_t* src_offsets = nullptr;  // [pairs + 1]
  const uint32_t* tgt_offsets = nullptr;
  const uint8_t* src_ids = nullptr;       // src_tokens ids of id_bytes each
  const uint8_t* tgt_ids = nullptr;
};
// InputError "NAME: ..." when `data` is not a complete shard of this version.
ShardView parse_shard(const uint8_t* data, size_t size, const std::string& name);

// The ids of one side of `pair` (a pair of `shard`), checked: the shard's
// offsets must give the index's length, and every id must be below `vocab`;
// InputError naming the shard (`name`) otherwise.
void read_pair_ids(const IndexView& index, const ShardView& shard, uint64_t pair, bool source, int64_t vocab,
                   int64_t* out, const std::string& name);

// Writes a prepared corpus's index and shards into a folder (the caller
// stages the folder and moves it into place). Pairs are added in order.
class ShardWriter {
 public:
  ShardWriter(std::string dir, uint32_t id_bytes, int64_t pairs_per_shard);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // ids: no specials; each fits id_bytes; each side at most 65,535 ids.
  void add(const int32_t* src, size_t src_n, const int32_t* tgt, size_t tgt_n);
  // Writes the last shard and index.bin; IoError naming a file that cannot be written.
  void finish();

  int64_t pairs() const { return static_cast<int64_t>(src_len_.size()); }
  int64_t shards() const { return static_cast<int64_t>(shard_first_.size()) - 1; }
  uint64_t src_tokens() const { return src_tokens_; }
  uint64_t tgt_tokens() const { return tgt_tokens_; }

 private:
  void flush_shard();

  std::string dir_;
  uint32_t id_bytes_;
  int64_t pairs_per_shard_;
  std::vector<uint64_t> shard_first_;
  std::vector<uint16_t> src_len_, tgt_len_;
  uint64_t src_tokens_ = 0, tgt_tokens_ = 0;
  // The shard being filled.
  std::vector<uint32_t> src_off_{0}, tgt_off_{0};
  std::string src_bytes_, tgt_bytes_;
  uint64_t shard_pairs_ = 0;
};

// A prepared corpus, memory-mapped. Opening checks every header against the
// files' sizes, the index and the manifest's counts (in milliseconds, without
// reading the ids); reading a pair checks its offsets and ids. Any
// disagreement is an InputError naming the file.
class PreparedCorpus : public TokenPairs {
 public:
  // dir: a folder `prepare_corpus` made. src_vocab/tgt_vocab: every id must
  // be below them (the tokenizers' sizes).
  PreparedCorpus(const std::string& dir, int64_t src_vocab, int64_t tgt_vocab);
  ~PreparedCorpus() override;
  PreparedCorpus(const PreparedCorpus&) = delete;
  PreparedCorpus& operator=(const PreparedCorpus&) = delete;

  int64_t size() const override { return static_cast<int64_t>(index_.pairs); }
  int64_t src_length(int64_t i) const override { return index_.src_len[i]; }
  int64_t tgt_length(int64_t i) const override { return index_.tgt_len[i]; }
  void src_ids(int64_t i, int64_t* out) const override;
  void tgt_ids(int64_t i, int64_t* out) const override;

  const std::string& dir() const { return dir_; }
  int64_t shards() const { return static_cast<int64_t>(shards_.size()); }

 private:
  struct Mapping;
  void ids(int64_t i, bool source, int64_t* out) const;

  std::string dir_;
  int64_t src_vocab_, tgt_vocab_;
  std::unique_ptr<Mapping> index_map_;
  IndexView index_;
  std::vector<std::unique_ptr<Mapping>> shard_maps_;
  std::vector<ShardView> shards_;
};

}  // namespace nmt::data
