#include "data/shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "util/errors.h"

namespace nmt::data {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the shard format is little-endian, as is this host's");

namespace {

constexpr size_t kHeader = 64;
constexpr char kIndexMagic[8] = {'N', 'M', 'T', 'I', 'N', 'D', 'E', 'X'};
constexpr char kShardMagic[8] = {'N', 'M', 'T', 'S', 'H', 'A', 'R', 'D'};

// The 64-byte headers: magic, version, a 32-bit field, then six 64-bit ones.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t small;     // index: 0; shard: id_bytes
  uint64_t words[6];  // index: shards, pairs, src_tokens, tgt_tokens, 0, 0
                      // shard: shard, first_pair, pairs, src_tokens, tgt_tokens, 0
};
static_assert(sizeof(Header) == kHeader, "headers are 64 bytes");

[[noreturn]] void bad(const std::string& name, const std::string& what) { throw InputError(name + ": " + what); }

// "an index", "a shard": the kind of file with its article, for messages.
std::string a_kind(const char* kind) { return std::string(kind[0] == 'i' ? "an " : "a ") + kind; }

Header read_header(const uint8_t* data, size_t size, const std::string& name, const char (&magic)[8],
                   const char* kind) {
  if (size < kHeader)
    bad(name, "truncated: " + std::to_string(size) + " bytes, shorter than " + a_kind(kind) + " header (64)");
  Header h;
  std::memcpy(&h, data, kHeader);
  if (std::memcmp(h.magic, magic, 8) != 0) bad(name, "not " + a_kind(kind) + " of a prepared corpus (wrong magic)");
  if (h.version != kShardFormatVersion)
    bad(name, std::string(kind) + " format version " + std::to_string(h.version) + ", this nmt reads version " +
                  std::to_string(kShardFormatVersion) + " (prepare the corpus again: nmt prepare)");
  return h;
}

// a * b + c with overflow refused (sizes come from untrusted headers).
bool mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  if (b != 0 && a > (UINT64_MAX - c) / b) return false;
  *out = a * b + c;
  return true;
}

void write_all(const std::string& path, const std::vector<std::pair<const void*, size_t>>& parts) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw IoError(path + ": cannot write: " + std::strerror(errno));
  for (const auto& [p, n] : parts) {
    if (n > 0 && std::fwrite(p, 1, n, f) != n) {
      const int err = errno;
      std::fclose(f);
      throw IoError(path + ": cannot write: " + std::strerror(err));
    }
  }
  if (std::fclose(f) != 0) throw IoError(path + ": cannot write: " + std::strerror(errno));
}

}  // namespace

std::string shard_file_name(int64_t shard) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard-%05lld.bin", static_cast<long long>(shard));
  return buf;
}

IndexView parse_index(const uint8_t* data, size_t size, const std::string& name) {
  const Header h = read_header(data, size, name, kIndexMagic, "index");
  IndexView v;
  v.shards = h.words[0], v.pairs = h.words[1], v.src_tokens = h.words[2], v.tgt_tokens = h.words[3];
  uint64_t table = 0, want = 0;
  if (h.small != 0 || h.words[4] != 0 || h.words[5] != 0) bad(name, "header fields that must be 0 are not");
  if (v.pairs >= (uint64_t{1} << 32)) bad(name, "more than 2^32 pairs (" + std::to_string(v.pairs) + ")");
  if (!mul_add(v.shards + 1, 8, kHeader, &table) || !mul_add(v.pairs, 4, table, &want) || want != size)
    bad(name, "truncated or too long: " + std::to_string(size) + " bytes for " + std::to_string(v.shards) +
                  " shards and " + std::to_string(v.pairs) + " pairs");
  v.shard_first = reinterpret_cast<const uint64_t*>(data + kHeader);
  v.src_len = reinterpret_cast<const uint16_t*>(data + table);
  v.tgt_len = v.src_len + v.pairs;
  if (v.shard_first[0] != 0 || v.shard_first[v.shards] != v.pairs) bad(name, "the shard table does not cover the pairs");
  for (uint64_t s = 0; s < v.shards; ++s)
    if (v.shard_first[s + 1] < v.shard_first[s]) bad(name, "the shard table goes backwards at shard " + std::to_string(s));
  return v;
}

ShardView parse_shard(const uint8_t* data, size_t size, const std::string& name) {
  const Header h = read_header(data, size, name, kShardMagic, "shard");
  ShardView v;
  v.id_bytes = h.small;
  v.shard = h.words[0], v.first_pair = h.words[1], v.pairs = h.words[2];
  v.src_tokens = h.words[3], v.tgt_tokens = h.words[4];
  if (v.id_bytes != 2 && v.id_bytes != 4) bad(name, "ids of " + std::to_string(v.id_bytes) + " bytes (2 or 4)");
  if (h.words[5] != 0) bad(name, "header fields that must be 0 are not");
  if (v.src_tokens > UINT32_MAX || v.tgt_tokens > UINT32_MAX) bad(name, "more than 2^32 tokens a side");
  uint64_t offsets = 0, ids_at = 0, tokens = 0, want = 0;
  if (!mul_add(v.pairs + 1, 8, kHeader, &ids_at) || !mul_add(v.src_tokens + v.tgt_tokens, v.id_bytes, ids_at, &want) ||
      want != size)
    bad(name, "truncated or too long: " + std::to_string(size) + " bytes for " + std::to_string(v.pairs) +
                  " pairs and " + std::to_string(v.src_tokens + v.tgt_tokens) + " ids");
  offsets = kHeader;
  v.src_offsets = reinterpret_cast<const uint32_t*>(data + offsets);
  v.tgt_offsets = v.src_offsets + v.pairs + 1;
  v.src_ids = data + ids_at;
  v.tgt_ids = v.src_ids + v.src_tokens * v.id_bytes;
  (void)tokens;
  if (v.src_offsets[0] != 0 || v.tgt_offsets[0] != 0 || v.src_offsets[v.pairs] != v.src_tokens ||
      v.tgt_offsets[v.pairs] != v.tgt_tokens)
    bad(name, "the offsets do not span the ids");
  return v;
}

void read_pair_ids(const IndexView& index, const ShardView& v, uint64_t pair, bool source, int64_t vocab,
                   int64_t* out, const std::string& name) {
  if (pair < v.first_pair || pair - v.first_pair >= v.pairs || pair >= index.pairs)
    bad(name, "pair " + std::to_string(pair) + " is not in this shard");
  const uint64_t j = pair - v.first_pair;
  const uint32_t* off = source ? v.src_offsets : v.tgt_offsets;
  const uint64_t length = source ? index.src_len[pair] : index.tgt_len[pair];
  const uint64_t tokens = source ? v.src_tokens : v.tgt_tokens;
  if (off[j + 1] < off[j] || off[j + 1] > tokens || off[j + 1] - off[j] != length)
    bad(name, "pair " + std::to_string(pair) + ": its " + (source ? "source" : "target") + " offsets disagree with " +
                  kCorpusIndex + " (a damaged corpus: nmt prepare --force)");
  const uint8_t* base = (source ? v.src_ids : v.tgt_ids) + static_cast<uint64_t>(off[j]) * v.id_bytes;
  for (uint64_t k = 0; k < length; ++k) {
    uint32_t id;
    if (v.id_bytes == 2) {
      uint16_t h;
      std::memcpy(&h, base + 2 * k, 2);
      id = h;
    } else {
      std::memcpy(&id, base + 4 * k, 4);
    }
    if (static_cast<int64_t>(id) >= vocab)
      bad(name, "pair " + std::to_string(pair) + ": id " + std::to_string(id) + " is outside the " +
                    (source ? "source" : "target") + " vocabulary of " + std::to_string(vocab) +
                    " (shards of other tokenizers: nmt prepare --force)");
    out[k] = id;
  }
}

// ------------------------------------------------------------------ writing

ShardWriter::ShardWriter(std::string dir, uint32_t id_bytes, int64_t pairs_per_shard)
    : dir_(std::move(dir)), id_bytes_(id_bytes), pairs_per_shard_(std::max<int64_t>(1, pairs_per_shard)) {
  shard_first_.push_back(0);
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::add(const int32_t* src, size_t src_n, const int32_t* tgt, size_t tgt_n) {
  if (src_n > UINT16_MAX || tgt_n > UINT16_MAX) throw std::logic_error("ShardWriter: a side longer than 65535 ids");
  const auto append = [&](std::string& bytes, const int32_t* ids, size_t n) {
    const size_t at = bytes.size();
    bytes.resize(at + n * id_bytes_);
    for (size_t k = 0; k < n; ++k) {
      if (id_bytes_ == 2) {
        const uint16_t v = static_cast<uint16_t>(ids[k]);
        std::memcpy(&bytes[at + 2 * k], &v, 2);
      } else {
        const uint32_t v = static_cast<uint32_t>(ids[k]);
        std::memcpy(&bytes[at + 4 * k], &v, 4);
      }
    }
  };
  append(src_bytes_, src, src_n);
  append(tgt_bytes_, tgt, tgt_n);
  src_off_.push_back(src_off_.back() + static_cast<uint32_t>(src_n));
  tgt_off_.push_back(tgt_off_.back() + static_cast<uint32_t>(tgt_n));
  src_len_.push_back(static_cast<uint16_t>(src_n));
  tgt_len_.push_back(static_cast<uint16_t>(tgt_n));
  src_tokens_ += src_n, tgt_tokens_ += tgt_n;
  // A shard stays well below 2^32 tokens a side: cut it early if it grows so.
  if (++shard_pairs_ >= static_cast<uint64_t>(pairs_per_shard_) || src_off_.back() > (1u << 30) ||
      tgt_off_.back() > (1u << 30))
    flush_shard();
}

void ShardWriter::flush_shard() {
  if (shard_pairs_ == 0) return;
  const int64_t shard = static_cast<int64_t>(shard_first_.size()) - 1;
  Header h{};
  std::memcpy(h.magic, kShardMagic, 8);
  h.version = kShardFormatVersion;
  h.small = id_bytes_;
  h.words[0] = static_cast<uint64_t>(shard);
  h.words[1] = shard_first_.back();
  h.words[2] = shard_pairs_;
  h.words[3] = src_off_.back();
  h.words[4] = tgt_off_.back();
  write_all(dir_ + "/" + shard_file_name(shard),
            {{&h, sizeof h},
             {src_off_.data(), src_off_.size() * 4},
             {tgt_off_.data(), tgt_off_.size() * 4},
             {src_bytes_.data(), src_bytes_.size()},
             {tgt_bytes_.data(), tgt_bytes_.size()}});
  shard_first_.push_back(shard_first_.back() + shard_pairs_);
  shard_pairs_ = 0;
  src_off_.assign(1, 0), tgt_off_.assign(1, 0);
  src_bytes_.clear(), tgt_bytes_.clear();
  src_bytes_.shrink_to_fit(), tgt_bytes_.shrink_to_fit();
}

void ShardWriter::finish() {
  flush_shard();
  Header h{};
  std::memcpy(h.magic, kIndexMagic, 8);
  h.version = kShardFormatVersion;
  h.words[0] = shard_first_.size() - 1;
  h.words[1] = src_len_.size();
  h.words[2] = src_tokens_;
  h.words[3] = tgt_tokens_;
  write_all(dir_ + "/" + kCorpusIndex, {{&h, sizeof h},
                                        {shard_first_.data(), shard_first_.size() * 8},
                                        {src_len_.data(), src_len_.size() * 2},
                                        {tgt_len_.data(), tgt_len_.size() * 2}});
}

// ------------------------------------------------------------------ reading

struct PreparedCorpus::Mapping {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string path;

  explicit Mapping(std::string p) : path(std::move(p)) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) bad(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      bad(path, std::string("cannot read: ") + std::strerror(err));
    }
    size = static_cast<size_t>(st.st_size);
    if (size > 0) {
      void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        bad(path, std::string("cannot map: ") + std::strerror(err));
      }
      data = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
  }
  ~Mapping() {
    if (data) ::munmap(const_cast<uint8_t*>(data), size);
  }
};

PreparedCorpus::PreparedCorpus(const std::string& dir, int64_t src_vocab, int64_t tgt_vocab)
    : dir_(dir), src_vocab_(src_vocab), tgt_vocab_(tgt_vocab) {
  index_map_ = std::make_unique<Mapping>(dir + "/" + kCorpusIndex);
  index_ = parse_index(index_map_->data, index_map_->size, index_map_->path);
  uint32_t id_bytes = 0;
  for (uint64_t s = 0; s < index_.shards; ++s) {
    auto m = std::make_unique<Mapping>(dir + "/" + shard_file_name(static_cast<int64_t>(s)));
    const ShardView v = parse_shard(m->data, m->size, m->path);
    if (v.shard != s || v.first_pair != index_.shard_first[s] || v.pairs != index_.shard_first[s + 1] - index_.shard_first[s])
      bad(m->path, "holds pairs [" + std::to_string(v.first_pair) + ", " + std::to_string(v.first_pair + v.pairs) +
                       ") as shard " + std::to_string(v.shard) + "; " + kCorpusIndex + " says shard " + std::to_string(s) +
                       " holds [" + std::to_string(index_.shard_first[s]) + ", " + std::to_string(index_.shard_first[s + 1]) + ")");
    if (id_bytes != 0 && v.id_bytes != id_bytes) bad(m->path, "ids of another width than shard 0's");
    id_bytes = v.id_bytes;
    if ((id_bytes == 2 && (src_vocab > 65536 || tgt_vocab > 65536)))
      bad(m->path, "16-bit ids for a vocabulary of more than 65,536 pieces");
    shards_.push_back(v);
    shard_maps_.push_back(std::move(m));
  }
  // The shards may hold more files than the index names (a folder tampered
  // with): those are ignored. One more shard file than the index has would
  // mean an index cut short, which its size check has refused.
  // Access is random: say so, so that the kernel reads no pages ahead.
  for (const auto& m : shard_maps_)
    if (m->data) ::madvise(const_cast<uint8_t*>(m->data), m->size, MADV_RANDOM);
}

PreparedCorpus::~PreparedCorpus() = default;

void PreparedCorpus::ids(int64_t i, bool source, int64_t* out) const {
  if (i < 0 || static_cast<uint64_t>(i) >= index_.pairs) throw std::out_of_range("PreparedCorpus: pair " + std::to_string(i));
  // The shard holding pair i: the last whose first pair is <= i.
  const uint64_t* first = index_.shard_first;
  const auto s = static_cast<size_t>(std::upper_bound(first, first + index_.shards + 1, static_cast<uint64_t>(i)) - first - 1);
  read_pair_ids(index_, shards_[s], static_cast<uint64_t>(i), source, source ? src_vocab_ : tgt_vocab_, out,
                shard_maps_[s]->path);
}

void PreparedCorpus::src_ids(int64_t i, int64_t* out) const { ids(i, true, out); }
void PreparedCorpus::tgt_ids(int64_t i, int64_t* out) const { ids(i, false, out); }

}  // namespace nmt::data
