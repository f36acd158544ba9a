#include "data/prepare.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "config/config.h"
#include "data/placeholder_mask.h"
#include "data/shards.h"
#include "data/text_io.h"
#include "runtime/length_limit.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/interrupt.h"
#include "util/number_text.h"
#include "util/sha256.h"
#include "util/test_hooks.h"
#include "util/utf8.h"

namespace nmt::data {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Pairs per shard: a shard of short sentences is a few tens of MB.
constexpr int64_t kPairsPerShard = 1 << 19;
// Pairs read and encoded together; each thread takes whole chunks.
constexpr size_t kChunkPairs = 4096;
// The sample of the tokenizers is drawn with a fixed seed: the same corpus
// and settings give the same tokenizers, whatever train.seed says.
constexpr uint64_t kSampleSeed = 0x5eed5eedULL;

// ----------------------------------------------------------- reading lines

// A text file read in large blocks, line by line ("\n"; a "\r" before it and
// a byte order mark at the start are dropped), hashing every byte on the way.
class LineStream {
 public:
  explicit LineStream(std::string path) : path_(std::move(path)), buf_(1 << 20) {
    file_ = std::fopen(path_.c_str(), "rb");
    if (!file_) throw InputError(path_ + ": cannot open training data: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(::fileno(file_), &st) == 0) size_ = static_cast<uint64_t>(st.st_size);
  }
  ~LineStream() {
    if (file_) std::fclose(file_);
  }
  LineStream(const LineStream&) = delete;
  LineStream& operator=(const LineStream&) = delete;

  // The next line into `line`; false at the end.
  bool next(std::string& line) {
    line.clear();
    for (;;) {
      if (pos_ == end_ && !fill()) {
        if (line.empty() && !partial_) return false;
        partial_ = false;
        break;
      }
      const char* start = buf_.data() + pos_;
      const void* nl = std::memchr(start, '\n', end_ - pos_);
      if (!nl) {
        line.append(start, end_ - pos_);
        partial_ = true;
        pos_ = end_;
        continue;
      }
      const size_t n = static_cast<const char*>(nl) - start;
      line.append(start, n);
      pos_ += n + 1;
      partial_ = false;
      break;
    }
    if (number_ == 0 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ++number_;
    return true;
  }

  int64_t line_number() const { return number_; }
  uint64_t bytes_read() const { return read_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // SHA-256 of the bytes read so far (the whole file once next() said false).
  std::string sha256() { return sha_.hex(); }

 private:
  bool fill() {
    const size_t n = std::fread(buf_.data(), 1, buf_.size(), file_);
    if (n == 0) {
      if (std::ferror(file_)) throw InputError(path_ + ": cannot read: " + std::strerror(errno));
      return false;
    }
    sha_.update(buf_.data(), n);
    read_ += n;
    pos_ = 0, end_ = n;
    return true;
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  bool partial_ = false;  // a line without its "\n" is pending
  int64_t number_ = 0;
  uint64_t read_ = 0, size_ = 0;
  Sha256 sha_;
};

// Both sides in step, one pair at a time; InputError naming both files and
// their line counts when one ends first, and naming file:line for a line
// that is not text (unless such pairs are to be skipped: then *skipped).
class PairStream {
 public:
  PairStream(const std::string& src, const std::string& tgt, bool skip_invalid)
      : src_(src), tgt_(tgt), skip_invalid_(skip_invalid) {}

  bool next(std::string& s, std::string& t) {
    for (;;) {
      const bool a = src_.next(s), b = tgt_.next(t);
      if (a != b) mismatch(a ? src_ : tgt_, a ? tgt_ : src_);
      if (!a) return false;
      const std::string ps = line_problem(s), pt = line_problem(t);
      if (ps.empty() && pt.empty()) return true;
      if (!skip_invalid_) {
        const LineStream& at = ps.empty() ? tgt_ : src_;
        throw InputError(at.path() + ":" + std::to_string(at.line_number()) + ": " + (ps.empty() ? pt : ps) +
                         " (data.skip_invalid_lines: true skips such pairs instead)");
      }
      ++invalid_;
    }
  }

  int64_t pairs() const { return src_.line_number(); }
  int64_t invalid() const { return invalid_; }
  double progress() const {
    const uint64_t total = src_.size() + tgt_.size();
    return total ? static_cast<double>(src_.bytes_read() + tgt_.bytes_read()) / static_cast<double>(total) : 1.0;
  }
  LineStream& src() { return src_; }
  LineStream& tgt() { return tgt_; }

 private:
  // `longer` has a line where `shorter` ended: count the rest and say both.
  [[noreturn]] static void mismatch(LineStream& longer, LineStream& shorter) {
    std::string line;
    while (longer.next(line)) {
    }
    throw InputError(longer.path() + ": has " + std::to_string(longer.line_number()) + " lines but " +
                     shorter.path() + " has " + std::to_string(shorter.line_number()) +
                     " (a parallel corpus has one line per pair on each side)");
  }

  LineStream src_, tgt_;
  bool skip_invalid_;
  int64_t invalid_ = 0;
};

// ------------------------------------------------------------- duplicates

// A 64-bit hash of a pair's text (both sides, kept apart): two pairs that
// hash alike are taken for copies. At ten million distinct pairs the chance
// that any two collide is about 3 in a million.
uint64_t pair_hash(const std::string& s, const std::string& t) {
  const auto mix = [](uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
  };
  uint64_t h = 0x243f6a8885a308d3ULL;
  for (const std::string* side : {&s, &t}) {
    const std::string& x = *side;
    size_t i = 0;
    for (; i + 8 <= x.size(); i += 8) {
      uint64_t v;
      std::memcpy(&v, x.data() + i, 8);
      h = mix(h, v);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, x.data() + i, x.size() - i);
    h = mix(h, tail ^ (static_cast<uint64_t>(x.size()) << 56));
    h = mix(h, 0x5eaULL);  // the end of a side
  }
  return h == 0 ? 1 : h;
}

// Open addressing over 64-bit hashes (0 marks a free slot): 16 bytes a pair
// at most, where a node-based set would take about 40.
class HashSet {
 public:
  // True when h was new (and is now in).
  bool insert(uint64_t h) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    size_t i = h & (slots_.size() - 1);
    while (slots_[i] != 0) {
      if (slots_[i] == h) return false;
      i = (i + 1) & (slots_.size() - 1);
    }
    slots_[i] = h;
    ++used_;
    return true;
  }

 private:
  void grow() {
    std::vector<uint64_t> old(std::max<size_t>(1024, slots_.size() * 2), 0);
    old.swap(slots_);
    used_ = 0;
    for (uint64_t h : old)
      if (h) insert(h);
  }
  std::vector<uint64_t> slots_;
  size_t used_ = 0;
};

// ------------------------------------------------------------ the manifest

std::string encoding_settings(const Config& cfg) {
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.17g", cfg.data.max_length_ratio);
  return "max_len=" + std::to_string(cfg.data.max_len) + " max_length_ratio=" + ratio +
         " dedupe=" + (cfg.data.dedupe ? "true" : "false") +
         " skip_invalid_lines=" + (cfg.data.skip_invalid_lines ? "true" : "false") +
         " protect_placeholders=" + (cfg.tokenizer.protect_placeholders ? "true" : "false");
}

struct SourceFile {
  std::string path;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string sha256;
};

SourceFile stat_source(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(path + ": cannot open training data: " + std::strerror(errno));
  SourceFile f;
  f.path = path;
  f.size = static_cast<uint64_t>(st.st_size);
  f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return f;
}

nlohmann::json source_json(const SourceFile& f) {
  return {{"path", f.path}, {"size", f.size}, {"mtime_ns", f.mtime_ns}, {"sha256", f.sha256}};
}

// The manifest, read back; InputError naming it when it is not one.
struct Manifest {
  int version = 0;
  SourceFile src, tgt;
  std::string tokenizer_settings, encoding;
  int64_t sample_lines = 0;
  std::string src_model_sha256, tgt_model_sha256;
  int64_t lines = 0, pairs = 0, shards = 0, id_bytes = 0, sampled = 0;
  int64_t empty = 0, too_long = 0, ratio = 0, duplicates = 0, invalid = 0;
  uint64_t src_tokens = 0, tgt_tokens = 0;
  double target_source_ratio = 0;  // 0: not recorded (a corpus prepared by an earlier nmt)
  nlohmann::json json;
};

Manifest read_manifest(const std::string& path) {
  Manifest m;
  try {
    m.json = nlohmann::json::parse(read_file(path, "manifest"));
    const nlohmann::json& j = m.json;
    if (j.at("format").get<std::string>() != "nmt prepared corpus") throw InputError(path + ": not a prepared corpus's manifest");
    m.version = j.at("version").get<int>();
    if (m.version != static_cast<int>(kShardFormatVersion)) return m;  // stale: the caller says so
    for (auto [side, f] : {std::pair{"src", &m.src}, std::pair{"tgt", &m.tgt}}) {
      const auto& s = j.at("sources").at(side);
      f->path = s.at("path").get<std::string>();
      f->size = s.at("size").get<uint64_t>();
      f->mtime_ns = s.at("mtime_ns").get<int64_t>();
      f->sha256 = s.at("sha256").get<std::string>();
    }
    m.tokenizer_settings = j.at("tokenizer").at("settings").get<std::string>();
    m.sample_lines = j.at("tokenizer").at("sample_lines").get<int64_t>();
    m.src_model_sha256 = j.at("tokenizer").at("src_model_sha256").get<std::string>();
    m.tgt_model_sha256 = j.at("tokenizer").at("tgt_model_sha256").get<std::string>();
    m.encoding = j.at("encoding").get<std::string>();
    m.sampled = j.at("tokenizer").at("sampled").get<int64_t>();
    m.lines = j.at("lines").get<int64_t>();
    const auto& d = j.at("dropped");
    m.empty = d.at("empty").get<int64_t>(), m.too_long = d.at("too_long").get<int64_t>();
    m.ratio = d.at("ratio").get<int64_t>(), m.duplicates = d.at("duplicates").get<int64_t>();
    m.invalid = d.at("invalid").get<int64_t>();
    m.pairs = j.at("pairs").get<int64_t>();
    m.shards = j.at("shards").get<int64_t>();
    m.id_bytes = j.at("id_bytes").get<int64_t>();
    m.src_tokens = j.at("src_tokens").get<uint64_t>();
    m.tgt_tokens = j.at("tgt_tokens").get<uint64_t>();
    if (j.contains("target_source_ratio")) {
      m.target_source_ratio = j.at("target_source_ratio").get<double>();
      if (!(m.target_source_ratio > 0) || !std::isfinite(m.target_source_ratio))
        throw InputError(path + ": target_source_ratio " + j.at("target_source_ratio").dump() +
                         " is not a positive number (a damaged corpus: nmt prepare --force)");
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not a valid manifest (" + std::string(e.what()) + ")");
  }
  return m;
}

// ------------------------------------------------------------ the folder

bool is_corpus_file_name(const std::string& name) {
  for (const char* ours : {kCorpusManifest, kCorpusIndex, "src.model", "tgt.model", "src.vocab", "tgt.vocab",
                           "both.txt", "sample.src", "sample.tgt"})
    if (name == ours) return true;
  return name.size() == 15 && name.compare(0, 6, "shard-") == 0 && name.compare(11, 4, ".bin") == 0 &&
         std::all_of(name.begin() + 6, name.begin() + 11, [](char c) { return c >= '0' && c <= '9'; });
}

// An exclusive lock on DIR.lock for as long as it lives: two processes
// preparing the same corpus (two trainers, several ranks of one host) take
// turns, and the second finds the first's work done.
class FolderLock {
 public:
  explicit FolderLock(const std::string& dir) : path_(dir + ".lock") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IoError(path_ + ": cannot create: " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    spdlog::info("prepare: waiting for another nmt preparing {}", dir);
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) throw IoError(path_ + ": cannot lock: " + std::strerror(errno));
      throw_if_interrupted();
    }
  }
  ~FolderLock() { ::close(fd_); }  // releases the lock; the file stays (removing it would race a waiter)

 private:
  std::string path_;
  int fd_ = -1;
};

// The staging folder beside the prepared one; removed unless moved into place.
struct Staging {
  explicit Staging(std::string p) : path(std::move(p)) {
    remove_owned_tree(path, is_corpus_file_name, "a corpus being prepared");  // left by a run cut short
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw IoError(path + ": cannot create: " + ec.message());
  }
  ~Staging() {
    std::error_code ec;
    if (!path.empty()) remove_tree(path, ec);
  }
  std::string path;
};

// Progress on stderr for runs long enough to want it: a line every 10 s.
class Progress {
 public:
  explicit Progress(std::string what) : what_(std::move(what)), start_(Clock::now()), last_(start_) {}
  void update(int64_t pairs, double fraction) {
    const auto now = Clock::now();
    if (now - last_ < std::chrono::seconds(10)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    const double left = fraction > 0 ? s / fraction - s : 0;
    spdlog::info("prepare: {}: {} pairs, {:.0f}% ({:.0f} pairs/s, about {:.0f} s left)", what_, pairs,
                 100 * fraction, pairs / std::max(s, 1e-9), left);
  }

 private:
  std::string what_;
  Clock::time_point start_, last_;
};

// ------------------------------------------------------------ the passes

// Pass 1 (only when tokenizers are trained): every pair read and checked,
// the files hashed, and a uniform sample of the usable pairs (both sides
// non-empty) drawn by reservoir sampling: only the sample's pair numbers
// are kept, never their text.
struct Survey {
  int64_t lines = 0;
  std::vector<int64_t> sample;  // pair numbers (0-based), ascending
  std::string src_sha256, tgt_sha256;
};

Survey survey(const Config& cfg) {
  PairStream in(cfg.data.train_src, cfg.data.train_tgt, cfg.data.skip_invalid_lines);
  const auto k = static_cast<size_t>(cfg.tokenizer.sample_lines);
  std::mt19937_64 rng(kSampleSeed);
  Survey out;
  std::string s, t;
  uint64_t usable = 0;
  Progress progress("reading for the tokenizer sample");
  while (in.next(s, t)) {
    if (!s.empty() && !t.empty()) {
      const int64_t pair = in.pairs() - 1;
      if (out.sample.size() < k) {
        out.sample.push_back(pair);
      } else {
        const uint64_t j = rng() % (usable + 1);
        if (j < k) out.sample[j] = pair;
      }
      ++usable;
    }
    if ((in.pairs() & 0xFFFF) == 0) {
      throw_if_interrupted();
      progress.update(in.pairs(), in.progress());
    }
  }
  if (in.pairs() == 0) throw InputError(cfg.data.train_src + ": no sentences (empty file)");
  if (usable == 0)
    throw InputError(cfg.data.train_src + ": no sentence pairs: each of the " + std::to_string(in.pairs()) +
                     " lines is empty on one side or the other (" + cfg.data.train_tgt + ")");
  std::sort(out.sample.begin(), out.sample.end());
  out.lines = in.pairs();
  out.src_sha256 = in.src().sha256();
  out.tgt_sha256 = in.tgt().sha256();
  return out;
}

// Pass 2: the sampled pairs' text into DIR/sample.src and DIR/sample.tgt.
void write_sample(const Config& cfg, const std::vector<int64_t>& sample, const std::string& dir) {
  PairStream in(cfg.data.train_src, cfg.data.train_tgt, cfg.data.skip_invalid_lines);
  std::ofstream src(dir + "/sample.src", std::ios::binary), tgt(dir + "/sample.tgt", std::ios::binary);
  std::string s, t;
  size_t next = 0;
  while (next < sample.size() && in.next(s, t)) {
    if (in.pairs() - 1 != sample[next]) continue;
    src << s << '\n';
    tgt << t << '\n';
    ++next;
    if ((next & 0xFFFF) == 0) throw_if_interrupted();
  }
  if (!src.flush() || !tgt.flush()) throw IoError(dir + "/sample.src: cannot write the tokenizer sample");
}

// One chunk of pairs on its way through the encoders.
struct Chunk {
  std::vector<std::string> src, tgt;
  std::vector<std::vector<int32_t>> src_ids, tgt_ids;
  std::vector<uint64_t> hashes;
};

void encode_chunk(Chunk& c, const Tokenizer& src_tok, const Tokenizer& tgt_tok, bool protect, bool dedupe) {
  const size_t n = c.src.size();
  c.src_ids.assign(n, {});
  c.tgt_ids.assign(n, {});
  c.hashes.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (c.src[i].empty() || c.tgt[i].empty()) continue;
    if (dedupe) c.hashes[i] = pair_hash(c.src[i], c.tgt[i]);
    const auto [source, target] = model_pair(c.src[i], c.tgt[i], protect);
    for (const auto& [text, tok, ids] : {std::tuple{&source, &src_tok, &c.src_ids[i]}, std::tuple{&target, &tgt_tok, &c.tgt_ids[i]}}) {
      const std::vector<int64_t> v = tok->encode(*text);
      ids->assign(v.begin(), v.end());
    }
  }
}

// Pass 3: every pair encoded by `threads` threads, filtered, and written to
// the shards in order. Fills the report's counts.
void encode_all(const Config& cfg, const Tokenizer& src_tok, const Tokenizer& tgt_tok, const std::string& dir,
                int threads, PrepareReport& r, std::string* src_sha, std::string* tgt_sha) {
  const uint32_t id_bytes = src_tok.vocab_size() <= 65536 && tgt_tok.vocab_size() <= 65536 ? 2 : 4;
  ShardWriter writer(dir, id_bytes, kPairsPerShard);
  PairStream in(cfg.data.train_src, cfg.data.train_tgt, cfg.data.skip_invalid_lines);
  HashSet seen;
  const int64_t max_len = cfg.data.max_len;
  const double ratio = cfg.data.max_length_ratio;
  std::vector<Chunk> round(static_cast<size_t>(2 * threads));
  LengthRatioCounter ratios;
  Progress progress("encoding");
  for (bool more = true; more;) {
    // Read a round of chunks, encode them side by side, then keep their
    // pairs in order.
    size_t filled = 0;
    for (Chunk& c : round) {
      c.src.clear(), c.tgt.clear();
      std::string s, t;
      while (c.src.size() < kChunkPairs && (more = in.next(s, t))) c.src.push_back(std::move(s)), c.tgt.push_back(std::move(t));
      if (!c.src.empty()) ++filled;
      if (!more) break;
    }
    std::vector<std::thread> pool;
    std::exception_ptr failure;
    std::mutex failure_mutex;
    for (int w = 0; w < threads; ++w)
      pool.emplace_back([&, w] {
        try {
          for (size_t k = static_cast<size_t>(w); k < filled; k += static_cast<size_t>(threads))
            encode_chunk(round[k], src_tok, tgt_tok, cfg.tokenizer.protect_placeholders, cfg.data.dedupe);
        } catch (...) {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
      });
    for (auto& t : pool) t.join();
    if (failure) std::rethrow_exception(failure);
    for (size_t k = 0; k < filled; ++k) {
      const Chunk& c = round[k];
      for (size_t i = 0; i < c.src.size(); ++i) {
        const auto& s = c.src_ids[i];
        const auto& t = c.tgt_ids[i];
        const auto sn = static_cast<int64_t>(s.size()), tn = static_cast<int64_t>(t.size());
        // +1: the decoder sees <start> y1..yn and predicts y1..yn <end>.
        if (sn == 0 || tn == 0) ++r.empty;
        else if (sn > max_len || tn + 1 > max_len) ++r.too_long;
        else if (ratio > 0 && static_cast<double>(std::max(sn, tn)) > ratio * static_cast<double>(std::min(sn, tn))) ++r.ratio;
        else if (cfg.data.dedupe && !seen.insert(c.hashes[i])) ++r.duplicates;
        else writer.add(s.data(), s.size(), t.data(), t.size()), ratios.add(sn, tn);
      }
    }
    test_hold("prepare-round", /*until_signal=*/true);
    throw_if_interrupted();  // between rounds: nothing half-written that the staging folder does not hold
    progress.update(in.pairs(), in.progress());
  }
  writer.finish();
  r.lines = in.pairs();
  r.invalid = in.invalid();
  r.pairs = writer.pairs();
  r.shards = writer.shards();
  r.src_tokens = writer.src_tokens();
  r.tgt_tokens = writer.tgt_tokens();
  r.id_bytes = static_cast<int>(id_bytes);
  r.target_source_ratio = ratios.quantile(kLengthRatioQuantile);
  if (src_sha) *src_sha = in.src().sha256();
  if (tgt_sha) *tgt_sha = in.tgt().sha256();
  if (r.pairs == 0)
    throw InputError(cfg.data.train_src + ": no usable pair (" + std::to_string(r.empty) + " with an empty side, " +
                     std::to_string(r.too_long) + " longer than data.max_len " + std::to_string(max_len) + ", " +
                     std::to_string(r.ratio) + " beyond data.max_length_ratio, " + std::to_string(r.duplicates) +
                     " duplicates, " + std::to_string(r.invalid) + " not text)");
}

// Whether `m` still describes what cfg would prepare: "" when it does, else
// why not, in words. *tokenizers_ok: the tokenizers may be kept.
// *touched: a source's time moved but its content did not (its checksum
// says so), and the manifest should learn the new time.
std::string staleness(const Manifest& m, const Config& cfg, const SourceFile& src, const SourceFile& tgt,
                      const PrepareOptions& opts, const std::string& dir, bool* tokenizers_ok, bool* touched) {
  *tokenizers_ok = false;
  *touched = false;
  if (m.version != static_cast<int>(kShardFormatVersion))
    return "it was prepared in format version " + std::to_string(m.version) + ", this nmt writes version " +
           std::to_string(kShardFormatVersion);
  for (auto [was, now] : {std::pair{&m.src, &src}, std::pair{&m.tgt, &tgt}}) {
    if (was->path != now->path) return "it was made from " + was->path + ", not " + now->path;
    if (was->size != now->size)
      return now->path + " changed (" + std::to_string(was->size) + " -> " + std::to_string(now->size) + " bytes)";
    if (was->mtime_ns != now->mtime_ns) {
      if (sha256_file(now->path) != was->sha256) return now->path + " changed (same size, other content)";
      *touched = true;
    }
  }
  std::string model_reason;
  if (opts.src_model && opts.tgt_model) {
    Sha256 a, b;
    a.update(*opts.src_model), b.update(*opts.tgt_model);
    if (a.hex() != m.src_model_sha256 || b.hex() != m.tgt_model_sha256)
      model_reason = "its tokenizers are not the run's";
  } else if (m.tokenizer_settings != tokenizer_settings(cfg.tokenizer)) {
    model_reason = "the tokenizer settings changed";
  } else if (m.sample_lines != cfg.tokenizer.sample_lines) {
    model_reason = "tokenizer.sample_lines changed (" + std::to_string(m.sample_lines) + " -> " +
                   std::to_string(cfg.tokenizer.sample_lines) + ")";
  } else {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(dir) / "src.model", ec) || !fs::is_regular_file(fs::path(dir) / "tgt.model", ec))
      model_reason = "its tokenizers are missing";
  }
  if (!model_reason.empty()) return model_reason;
  *tokenizers_ok = true;
  if (m.encoding != encoding_settings(cfg)) return "the data filters changed (" + m.encoding + " -> " + encoding_settings(cfg) + ")";
  return "";
}

// The manifest's counts against the files: InputError naming what disagrees.
void check_against_manifest(const Manifest& m, const PreparedCorpus& corpus, const std::string& path) {
  if (m.pairs != corpus.size() || m.shards != corpus.shards())
    throw InputError(path + ": says " + std::to_string(m.pairs) + " pairs in " + std::to_string(m.shards) +
                     " shards; the index has " + std::to_string(corpus.size()) + " in " +
                     std::to_string(corpus.shards()) + " (a damaged corpus: nmt prepare --force)");
}

std::string absolute(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? fs::absolute(path).string() : p.string();
}

// The ratio encode_all records, counted again from a prepared corpus's index.
double length_ratio(const PreparedCorpus& corpus) {
  LengthRatioCounter ratios;
  for (int64_t i = 0; i < corpus.size(); ++i) ratios.add(corpus.src_length(i), corpus.tgt_length(i));
  return ratios.quantile(kLengthRatioQuantile);
}

}  // namespace

std::string PrepareReport::summary() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%lld of %lld pairs kept (dropped: %lld with an empty side, %lld over data.max_len, %lld beyond "
                "data.max_length_ratio, %lld duplicates, %lld not text); %llu + %llu tokens in %lld shard(s) of "
                "%d-byte ids",
                static_cast<long long>(pairs), static_cast<long long>(lines), static_cast<long long>(empty),
                static_cast<long long>(too_long), static_cast<long long>(ratio), static_cast<long long>(duplicates),
                static_cast<long long>(invalid), static_cast<unsigned long long>(src_tokens),
                static_cast<unsigned long long>(tgt_tokens), static_cast<long long>(shards), id_bytes);
  // What decoding's length limit is derived from (runtime/length_limit.h).
  return std::string(buf) + "; target/source length ratio " + shortest_number(target_source_ratio) + " (" +
         shortest_number(kLengthRatioQuantile * 100) + "% of pairs within)";
}

std::string prepared_dir_for(const Config& cfg) {
  const std::string key = absolute(cfg.data.train_src) + "\n" + absolute(cfg.data.train_tgt);
  Sha256 h;
  h.update(key);
  const std::string name = fs::path(cfg.data.train_src).filename().string() + "+" +
                           fs::path(cfg.data.train_tgt).filename().string() + "-" + h.hex().substr(0, 8);
  return (fs::path(cfg.data.prepared_dir) / name).string();
}

PrepareReport prepare_corpus(const Config& cfg, const PrepareOptions& opts) {
  const auto start = Clock::now();
  PrepareReport r;
  r.dir = prepared_dir_for(cfg);
  r.src_model = r.dir + "/src.model";
  r.tgt_model = r.dir + "/tgt.model";
  SourceFile src = stat_source(cfg.data.train_src), tgt = stat_source(cfg.data.train_tgt);
  src.path = absolute(src.path), tgt.path = absolute(tgt.path);
  std::error_code ec;
  fs::create_directories(cfg.data.prepared_dir, ec);
  if (ec) throw IoError(cfg.data.prepared_dir + ": cannot create: " + ec.message());
  FolderLock lock(r.dir);

  const std::string manifest_path = r.dir + "/" + kCorpusManifest;
  bool tokenizers_ok = false, touched = false;
  if (!fs::exists(r.dir, ec)) {
    r.reason = "no prepared corpus yet";
  } else if (!fs::exists(manifest_path, ec)) {
    // A folder without a manifest is not ours to replace unless it holds
    // only what a preparation writes.
    if (const std::string foreign = first_foreign_entry(r.dir, is_corpus_file_name); !foreign.empty())
      throw InputError(foreign + ": not written by nmt (" + r.dir + " should hold a prepared corpus); move it away "
                       "or set data.prepared_dir");
    r.reason = "it has no manifest (a preparation that did not finish)";
  } else {
    Manifest m = read_manifest(manifest_path);
    r.reason = opts.force ? "--force" : staleness(m, cfg, src, tgt, opts, r.dir, &tokenizers_ok, &touched);
    if (r.reason.empty()) {
      // Fresh: only a look at its files, then nothing to do.
      const Tokenizer src_tok(r.src_model), tgt_tok(r.tgt_model);
      const PreparedCorpus corpus(r.dir, src_tok.vocab_size(), tgt_tok.vocab_size());
      check_against_manifest(m, corpus, manifest_path);
      bool rewrite = touched;
      if (m.target_source_ratio <= 0) {
        // Prepared before the ratio was recorded: counted from the index
        // (its lengths are the kept pairs'), and recorded for next time.
        m.target_source_ratio = length_ratio(corpus);
        m.json["target_source_ratio"] = m.target_source_ratio;
        spdlog::info("prepare: {}: target/source length ratio {} counted from its index and recorded", r.dir,
                     m.target_source_ratio);
        rewrite = true;
      }
      if (touched) {  // the same content under a new time: next time, no checksum
        m.json["sources"]["src"]["mtime_ns"] = src.mtime_ns;
        m.json["sources"]["tgt"]["mtime_ns"] = tgt.mtime_ns;
      }
      if (rewrite) write_file_atomic(manifest_path, m.json.dump(1) + "\n");
      r.reused = true;
      r.lines = m.lines, r.pairs = m.pairs, r.shards = m.shards, r.id_bytes = static_cast<int>(m.id_bytes);
      r.empty = m.empty, r.too_long = m.too_long, r.ratio = m.ratio, r.duplicates = m.duplicates;
      r.invalid = m.invalid, r.sampled = m.sampled;
      r.src_tokens = m.src_tokens, r.tgt_tokens = m.tgt_tokens;
      r.target_source_ratio = m.target_source_ratio;
      r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      spdlog::info("prepare: {} is up to date: {} pairs ({:.2f} s)", r.dir, r.pairs, r.seconds);
      return r;
    }
    if (opts.force) tokenizers_ok = false;
  }
  spdlog::info("prepare: preparing {}: {}", r.dir, r.reason);

  Staging staged(r.dir + ".tmp");
  const std::string src_model = staged.path + "/src.model", tgt_model = staged.path + "/tgt.model";
  const int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string src_sha, tgt_sha;
  if (opts.src_model && opts.tgt_model) {
    write_file_atomic(src_model, *opts.src_model);
    write_file_atomic(tgt_model, *opts.tgt_model);
  } else if (tokenizers_ok) {
    write_file_atomic(src_model, read_file(r.src_model, "tokenizer model"));
    write_file_atomic(tgt_model, read_file(r.tgt_model, "tokenizer model"));
    spdlog::info("prepare: keeping its tokenizers");
  } else {
    const Survey s = survey(cfg);
    write_sample(cfg, s.sample, staged.path);
    r.sampled = static_cast<int64_t>(s.sample.size());
    spdlog::info("prepare: {} pairs read; tokenizers trained on {} of them", s.lines, r.sampled);
    train_tokenizers(cfg.tokenizer, staged.path + "/sample.src", staged.path + "/sample.tgt", staged.path);
    fs::remove(staged.path + "/sample.src", ec);
    fs::remove(staged.path + "/sample.tgt", ec);
    r.tokenizers_trained = true;
    throw_if_interrupted();
  }
  const Tokenizer src_tok(src_model), tgt_tok(tgt_model);
  encode_all(cfg, src_tok, tgt_tok, staged.path, threads, r, &src_sha, &tgt_sha);
  src.sha256 = src_sha, tgt.sha256 = tgt_sha;

  // The manifest last: a folder without one is a preparation cut short.
  const nlohmann::json manifest = {
      {"format", "nmt prepared corpus"},
      {"version", kShardFormatVersion},
      {"sources", {{"src", source_json(src)}, {"tgt", source_json(tgt)}}},
      {"tokenizer",
       {{"settings", tokenizer_settings(cfg.tokenizer)},
        {"sample_lines", cfg.tokenizer.sample_lines},
        {"sampled", r.sampled},
        {"src_model_sha256", sha256_file(src_model)},
        {"tgt_model_sha256", sha256_file(tgt_model)}}},
      {"encoding", encoding_settings(cfg)},
      {"lines", r.lines},
      {"dropped",
       {{"empty", r.empty}, {"too_long", r.too_long}, {"ratio", r.ratio}, {"duplicates", r.duplicates}, {"invalid", r.invalid}}},
      {"pairs", r.pairs},
      {"shards", r.shards},
      {"id_bytes", r.id_bytes},
      {"src_tokens", r.src_tokens},
      {"tgt_tokens", r.tgt_tokens},
      {"target_source_ratio", r.target_source_ratio},
  };
  write_file_atomic(staged.path + "/" + kCorpusManifest, manifest.dump(1) + "\n");
  throw_if_interrupted();
  if (const std::string foreign = first_foreign_entry(r.dir, is_corpus_file_name); !foreign.empty())
    throw InputError(foreign + ": not written by nmt (" + r.dir + " should hold a prepared corpus); move it away "
                     "or set data.prepared_dir");
  replace_directory(staged.path, r.dir);
  staged.path.clear();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  spdlog::info("prepare: {}: {} in {:.1f} s ({:.0f} pairs/s)", r.dir, r.summary(), r.seconds,
               static_cast<double>(r.lines) / std::max(r.seconds, 1e-9));
  return r;
}

}  // namespace nmt::data
