#include "tokenizer/tokenizer.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "config/config.h"
#include "nmt_build_paths.h"
#include "tokenizer/sentinels.h"
#include "tokenizer/special_ids.h"
#include "tokenizer/spm_shim.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/interrupt.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// The SentencePiece module, loaded once into its own namespace (spm_shim.h).
struct SpmLibrary {
  decltype(&nmt_spm_load) load;
  decltype(&nmt_spm_load_bytes) load_bytes;
  decltype(&nmt_spm_free) free;
  decltype(&nmt_spm_encode) encode;
  decltype(&nmt_spm_decode) decode;
  decltype(&nmt_spm_id_to_piece) id_to_piece;
  decltype(&nmt_spm_piece_to_id) piece_to_id;
  decltype(&nmt_spm_vocab_size) vocab_size;
  decltype(&nmt_spm_special_id) special_id;
  decltype(&nmt_spm_train) train;

  static const SpmLibrary& get() {
    static const SpmLibrary lib = open();
    return lib;
  }

 private:
  // Beside the library or program this code is in (an installed libnmt.so,
  // a Python package's, the build's nmt), next to the executable and one
  // level up (build/tests/), or where the build put it; NMT_SPM_MODULE
  // overrides.
  static std::vector<std::string> candidates() {
    std::vector<std::string> c;
    if (const char* env = std::getenv("NMT_SPM_MODULE")) c.emplace_back(env);
    Dl_info self{};
    if (dladdr(reinterpret_cast<const void*>(&SpmLibrary::get), &self) != 0 && self.dli_fname != nullptr) {
      const fs::path here = fs::path(self.dli_fname).parent_path();
      c.push_back((here / "libnmt_spm.so").string());
      c.push_back((here / "nmt" / "libnmt_spm.so").string());
    }
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      c.push_back((exe.parent_path() / "libnmt_spm.so").string());
      c.push_back((exe.parent_path().parent_path() / "libnmt_spm.so").string());
      c.push_back((exe.parent_path().parent_path() / "lib" / "nmt" / "libnmt_spm.so").string());
    }
    c.emplace_back(NMT_SPM_MODULE_PATH);
    return c;
  }

  static SpmLibrary open() {
    void* h = nullptr;
    std::string tried;
    for (const auto& path : candidates()) {
      if (!fs::exists(path)) continue;
      h = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) break;
      tried += std::string(" ") + path + " (" + dlerror() + ")";
    }
    if (!h) throw std::runtime_error("cannot load the SentencePiece module libnmt_spm.so:" + tried);
    SpmLibrary lib{};
    const auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p) throw std::runtime_error(std::string("libnmt_spm.so lacks ") + name);
      return p;
    };
    lib.load = reinterpret_cast<decltype(lib.load)>(sym("nmt_spm_load"));
    lib.load_bytes = reinterpret_cast<decltype(lib.load_bytes)>(sym("nmt_spm_load_bytes"));
    lib.free = reinterpret_cast<decltype(lib.free)>(sym("nmt_spm_free"));
    lib.encode = reinterpret_cast<decltype(lib.encode)>(sym("nmt_spm_encode"));
    lib.decode = reinterpret_cast<decltype(lib.decode)>(sym("nmt_spm_decode"));
    lib.id_to_piece = reinterpret_cast<decltype(lib.id_to_piece)>(sym("nmt_spm_id_to_piece"));
    lib.piece_to_id = reinterpret_cast<decltype(lib.piece_to_id)>(sym("nmt_spm_piece_to_id"));
    lib.vocab_size = reinterpret_cast<decltype(lib.vocab_size)>(sym("nmt_spm_vocab_size"));
    lib.special_id = reinterpret_cast<decltype(lib.special_id)>(sym("nmt_spm_special_id"));
    lib.train = reinterpret_cast<decltype(lib.train)>(sym("nmt_spm_train"));
    return lib;
  }
};

}  // namespace

Tokenizer::Tokenizer(const std::string& model_path) : path_(model_path) {
  char err[512] = {0};
  adopt(SpmLibrary::get().load(model_path.c_str(), err, sizeof err), err);
}

Tokenizer Tokenizer::from_bytes(const std::string& bytes, const std::string& name) {
  Tokenizer t;
  t.path_ = name;
  char err[512] = {0};
  t.adopt(SpmLibrary::get().load_bytes(bytes.data(), static_cast<long>(bytes.size()), err, sizeof err), err);
  return t;
}

void Tokenizer::adopt(void* handle, const char* err) {
  const SpmLibrary& lib = SpmLibrary::get();
  if (!handle) throw InputError(path_ + ": cannot load SentencePiece model: " + err);
  handle_ = handle;
  vocab_size_ = lib.vocab_size(handle_);
  if (lib.special_id(handle_, 0) != kPadId || lib.special_id(handle_, 1) != kUnkId ||
      lib.special_id(handle_, 2) != kStartId || lib.special_id(handle_, 3) != kEndId) {
    lib.free(handle_);
    handle_ = nullptr;
    throw InputError(path_ + ": special ids differ from <pad>=0 <unk>=1 <start>=2 <end>=3");
  }
}

Tokenizer::~Tokenizer() {
  if (handle_) SpmLibrary::get().free(handle_);
}

Tokenizer::Tokenizer(Tokenizer&& other) noexcept
    : path_(std::move(other.path_)), handle_(other.handle_), vocab_size_(other.vocab_size_) {
  other.handle_ = nullptr;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  const SpmLibrary& lib = SpmLibrary::get();
  std::vector<int> ids(text.size() + 8);  // never more pieces than bytes (+ a margin)
  int n = lib.encode(handle_, text.c_str(), ids.data(), static_cast<int>(ids.size()));
  if (n > static_cast<int>(ids.size())) {
    ids.resize(n);
    n = lib.encode(handle_, text.c_str(), ids.data(), n);
  }
  return {ids.begin(), ids.begin() + n};
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> kept;
  for (int64_t id : ids)
    if (id > kEndId && id < vocab_size_) kept.push_back(static_cast<int>(id));
  const SpmLibrary& lib = SpmLibrary::get();
  std::string out(kept.size() * 16 + 16, '\0');
  int n = lib.decode(handle_, kept.data(), static_cast<int>(kept.size()), out.data(),
                     static_cast<int>(out.size()));
  if (n > static_cast<int>(out.size())) {
    out.resize(n);
    n = lib.decode(handle_, kept.data(), static_cast<int>(kept.size()), out.data(), n);
  }
  out.resize(n);
  return out;
}

std::vector<std::string> Tokenizer::pieces(const std::vector<int64_t>& ids) const {
  const SpmLibrary& lib = SpmLibrary::get();
  std::vector<std::string> out;
  for (int64_t id : ids) {
    std::string p(64, '\0');
    int n = lib.id_to_piece(handle_, static_cast<int>(id), p.data(), static_cast<int>(p.size()));
    if (n > static_cast<int>(p.size())) {
      p.resize(n);
      n = lib.id_to_piece(handle_, static_cast<int>(id), p.data(), n);
    }
    p.resize(n);
    out.push_back(std::move(p));
  }
  return out;
}

int64_t Tokenizer::piece_id(const std::string& piece) const {
  return SpmLibrary::get().piece_to_id(handle_, piece.c_str());
}

int64_t Tokenizer::vocab_size() const { return vocab_size_; }

namespace {

// Placeholders that software messages carry and a translation must keep
// verbatim: as single pieces they are easy to copy and never split.
const std::vector<std::string>& placeholder_pieces() {
  static const std::vector<std::string> pieces = [] {
    std::vector<std::string> p;
    for (const char* conv : {"s", "d", "i", "u", "x", "X", "c", "f", "g", "e", "p", "ld", "lu",
                             "lld", "llu", "zu", "zd", "li", "lx", "llx", "'d", "'u", "'ld"})
      p.push_back(std::string("%") + conv);
    for (int n = 1; n <= 9; ++n)
      for (const char* conv : {"s", "d", "u", "lu", "ld", "i"})
        p.push_back(std::string("%").append(std::to_string(n)).append("$").append(conv));  // (not "%" + string&&: GCC 12's false -Wstringop-overflow in C++20)
    for (const char* tag : {"<b>", "</b>", "<i>", "</i>", "<u>", "</u>", "<tt>", "</tt>", "<br>",
                            "<br/>", "<small>", "</small>", "<big>", "</big>", "--", "%%"})
      p.emplace_back(tag);
    return p;
  }();
  return pieces;
}

// SentencePiece's trainer, once started, runs to its end (minutes on a
// sample of 2M lines) and cannot be asked to stop. So it runs in a child
// process, which a SIGINT/SIGTERM to nmt ends at once (SIGKILL): the command
// stops within a poll's time (kChildPollMs) instead of after the training.
// The child dies with nmt too (PR_SET_PDEATHSIG), so an nmt killed outright
// leaves no trainer writing into its staged folder. InputError naming
// `input` with SentencePiece's message when the training fails.
constexpr int kChildPollMs = 50;

void train_in_child(const SpmLibrary& lib, const std::string& args, const std::string& input) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw IoError(std::string("cannot start SentencePiece: pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(pipe_fds[0]), ::close(pipe_fds[1]);
    throw IoError(std::string("cannot start SentencePiece: fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // The child runs the SentencePiece module alone: nmt's other threads did
    // not come along, so nothing of nmt's (whose locks they may have held)
    // is called here; SentencePiece's module has its own heap and threads
    // (spm_shim.h), idle while nmt waits for it. _exit: nothing of the
    // parent's (stdio buffers, atexit handlers) runs twice.
    ::close(pipe_fds[0]);
    ::signal(SIGINT, SIG_IGN);  // the parent decides, and ends this process
    ::signal(SIGTERM, SIG_DFL);
    unblock_interrupt_signals();  // blocked in the thread that forked (util/interrupt.h)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    char err[512] = {0};
    const int rc = lib.train(args.c_str(), err, sizeof err);
    if (rc != 0) {
      const ssize_t ignored = ::write(pipe_fds[1], err, std::strlen(err));
      (void)ignored;
    }
    ::_exit(rc == 0 ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  std::string message;
  int status = 0;
  for (;;) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, kChildPollMs) > 0) {
      char buf[512];
      const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
      if (n > 0) message.append(buf, static_cast<size_t>(n));
    }
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (interrupted()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(pipe_fds[0]);
      throw Interrupted(interrupt_signal());
    }
  }
  for (char buf[512];;) {  // what the child wrote just before it ended
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n <= 0) break;
    message.append(buf, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (WIFSIGNALED(status))
    throw std::runtime_error(input + ": SentencePiece training was ended by signal " +
                             std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")");
  throw InputError(input + ": SentencePiece training failed: " + message);
}

void train_model(const std::string& input, const std::string& prefix, int64_t vocab,
                 double coverage, const TokenizerConfig& cfg) {
  std::ostringstream args;
  args << "--input=" << input << " --model_prefix=" << prefix << " --vocab_size=" << vocab
       << " --character_coverage=" << coverage << " --model_type=" << cfg.model_type
       << " --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3"
       << " --pad_piece=<pad> --unk_piece=<unk> --bos_piece=<start> --eos_piece=<end>"
       << " --normalization_rule_name=" << cfg.normalization
       << " --byte_fallback=" << (cfg.byte_fallback ? "true" : "false")
       << " --hard_vocab_limit=false --num_threads=2 --minloglevel=2";
  std::vector<std::string> symbols;
  if (cfg.placeholder_symbols) symbols = placeholder_pieces();
  if (cfg.protect_placeholders)
    symbols.insert(symbols.end(), sentinel_symbols().begin(), sentinel_symbols().end());
  if (!symbols.empty()) {
    args << " --user_defined_symbols=";
    for (size_t i = 0; i < symbols.size(); ++i) args << (i ? "," : "") << symbols[i];
  }
  train_in_child(SpmLibrary::get(), args.str(), input);
}

}  // namespace

std::string tokenizer_settings(const TokenizerConfig& cfg) {
  std::ostringstream settings;
  settings << cfg.shared << '|' << cfg.model_type << '|' << cfg.src_vocab_size << '|'
           << cfg.tgt_vocab_size << '|' << cfg.src_character_coverage << '|'
           << cfg.tgt_character_coverage << '|' << cfg.normalization << '|' << cfg.byte_fallback
           << '|' << cfg.placeholder_symbols << "|v2";
  if (cfg.protect_placeholders) settings << "|sentinels" << kMaxSentinels;
  return settings.str();
}

void train_tokenizers(const TokenizerConfig& cfg, const std::string& src_lines, const std::string& tgt_lines,
                      const std::string& dir) {
  const fs::path d(dir);
  spdlog::info("tokenizer: training SentencePiece ({}, {})", cfg.model_type,
               cfg.shared ? "shared" : "one per language");
  if (cfg.shared) {
    const std::string both = (d / "both.txt").string();
    write_file_atomic(both, read_file(src_lines, "tokenizer sample") + read_file(tgt_lines, "tokenizer sample"));
    train_model(both, (d / "src").string(), cfg.src_vocab_size,
                std::min(cfg.src_character_coverage, cfg.tgt_character_coverage), cfg);
    fs::remove(both);
    fs::copy_file(d / "src.model", d / "tgt.model", fs::copy_options::overwrite_existing);
  } else {
    train_model(src_lines, (d / "src").string(), cfg.src_vocab_size, cfg.src_character_coverage, cfg);
    train_model(tgt_lines, (d / "tgt").string(), cfg.tgt_vocab_size, cfg.tgt_character_coverage, cfg);
  }
  std::error_code ec;
  fs::remove(d / "src.vocab", ec);
  fs::remove(d / "tgt.vocab", ec);
}

}  // namespace nmt
