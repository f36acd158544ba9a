// The readers of a prepared corpus (data/shards.h): an index and a shard
// from one input (its first 4 bytes: the index's length, little-endian),
// each parsed, then every pair of the shard read when the index places it.
// Expected failures are InputError; anything else (a crash, an overflow, an
// out-of-bounds read that ASan sees) is a finding. Property: every id read
// is below the vocabulary and every pair's length is the index's.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data/shards.h"
#include "fuzz_util.h"
#include "util/errors.h"

namespace {

// The bytes in 8-byte aligned storage, as mmap gives them.
std::vector<uint64_t> aligned(const uint8_t* data, size_t size) {
  std::vector<uint64_t> v((size + 7) / 8 + 1, 0);
  if (size) std::memcpy(v.data(), data, size);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nmt;
  if (size < 4) return 0;
  uint32_t index_size;
  std::memcpy(&index_size, data, 4);
  if (index_size > size - 4) return 0;
  const auto index_bytes = aligned(data + 4, index_size);
  const auto shard_bytes = aligned(data + 4 + index_size, size - 4 - index_size);
  const auto* index_data = reinterpret_cast<const uint8_t*>(index_bytes.data());
  const auto* shard_data = reinterpret_cast<const uint8_t*>(shard_bytes.data());
  data::IndexView index;
  data::ShardView shard;
  try {
    index = data::parse_index(index_data, index_size, "index.bin");
  } catch (const InputError&) {
    return 0;
  }
  try {
    shard = data::parse_shard(shard_data, size - 4 - index_size, "shard-00000.bin");
  } catch (const InputError&) {
    return 0;
  }
  if (shard.shard >= index.shards || shard.first_pair != index.shard_first[shard.shard] ||
      shard.pairs != index.shard_first[shard.shard + 1] - index.shard_first[shard.shard])
    return 0;  // PreparedCorpus refuses such a shard before reading it
  constexpr int64_t kVocab = 40000;
  std::vector<int64_t> ids(65536);
  for (uint64_t p = shard.first_pair; p < shard.first_pair + shard.pairs; ++p)
    for (const bool source : {true, false}) {
      try {
        data::read_pair_ids(index, shard, p, source, kVocab, ids.data(), "shard-00000.bin");
      } catch (const InputError&) {
        continue;
      }
      const uint64_t length = source ? index.src_len[p] : index.tgt_len[p];
      for (uint64_t k = 0; k < length; ++k)
        fuzz::check(ids[k] >= 0 && ids[k] < kVocab, "an id outside the vocabulary was read");
    }
  return 0;
}
