#include "util/atomic_file.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <fstream>
#include <sstream>
#include <utility>

#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void io_fail(const std::string& path, const std::string& what, int err) {
  throw IoError(path + ": cannot " + what + ": " + std::strerror(err));
}

// Test hook: NMT_TEST_WRITE_LIMIT=N makes writes fail with ENOSPC once this
// process has written N bytes through this file (a full disk, on demand).
bool over_write_limit(size_t more) {
  static std::atomic<long long> written{0};
  const char* limit = std::getenv("NMT_TEST_WRITE_LIMIT");
  if (!limit) return false;
  return (written += static_cast<long long>(more)) > std::atoll(limit);
}

// remove_tree's visitor: children first (FTW_DEPTH), so folders are empty
// when their turn comes. The first failure is kept in tree_error.
thread_local int tree_error = 0;
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  if (::remove(path) != 0 && errno != ENOENT && tree_error == 0) tree_error = errno;
  return 0;
}

std::string unique_temp(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

std::string parent_of(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

// Where a write to `path` really lands: a symbolic link is followed, so
// that the file it points to is replaced and the link stays.
std::string resolve_links(const std::string& path) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(path, ec))) return path;
  const fs::path target = fs::weakly_canonical(path, ec);
  return ec ? path : target.string();
}

// An existing target that is not a regular file (/dev/null, a FIFO,
// /dev/stdout) is a stream: renaming over it would replace the device or
// pipe with a plain file, so it is written in place instead.
bool is_stream(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_fail(path, "open for fsync", errno);
  if (::fsync(fd) != 0 && !(directory && (errno == EINVAL || errno == EBADF))) {
    const int err = errno;
    ::close(fd);
    io_fail(path, "fsync", err);
  }
  ::close(fd);
}

}  // namespace

void sync_directory(const std::string& dir) { fsync_path(dir, /*directory=*/true); }

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open " + what + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError(path + ": cannot read " + what + ": " + std::strerror(errno));
  return ss.str();
}

// All of content to fd (retried after EINTR and short writes); the error
// number of a failed write, or 0.
static int write_all(int fd, std::string_view content) {
  size_t done = 0;
  while (done < content.size()) {
    const size_t chunk = std::min<size_t>(content.size() - done, 1 << 20);
    const ssize_t n = ::write(fd, content.data() + done, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

void write_file_atomic(const std::string& path, std::string_view content) {
  // AtomicFile owns the temporary, the rename and the cases that need none.
  AtomicFile file(path);
  const int fd = ::open(file.temp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_fail(file.path(), "write", errno);
  if (const int err = write_all(fd, content)) {
    ::close(fd);
    io_fail(file.path(), "write", err);
  }
  if (::close(fd) != 0) io_fail(file.path(), "write", errno);
  file.commit();
}

AppendFile::AppendFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) io_fail(path_, "open for appending", errno);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(std::string_view lines) {
  if (over_write_limit(lines.size())) io_fail(path_, "write", ENOSPC);
  if (const int err = write_all(fd_, lines)) io_fail(path_, "write", err);
}

void AppendFile::sync() {
  // A device or pipe (EINVAL, EROFS) has nothing to make durable.
  if (::fdatasync(fd_) != 0 && errno != EINVAL && errno != EROFS) io_fail(path_, "sync", errno);
}

AtomicFile::AtomicFile(std::string path)
    : path_(resolve_links(path)), stream_(is_stream(path_)), temp_(stream_ ? path_ : unique_temp(path_)) {}

AtomicFile::~AtomicFile() {
  if (!committed_ && !stream_) ::unlink(temp_.c_str());
}

void AtomicFile::commit() {
  if (stream_) {
    committed_ = true;
    return;
  }
  struct stat st {};
  if (::stat(temp_.c_str(), &st) != 0) io_fail(path_, "write", errno);
  if (over_write_limit(static_cast<size_t>(st.st_size))) io_fail(path_, "write", ENOSPC);
  fsync_path(temp_, /*directory=*/false);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) io_fail(path_, "replace", errno);
  committed_ = true;
  sync_directory(parent_of(path_));
}

void replace_directory(const std::string& staged, const std::string& dir) {
  // Files written by other code (SentencePiece's models) are made durable too.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(staged, ec))
    if (entry.is_regular_file()) fsync_path(entry.path().string(), /*directory=*/false);
  sync_directory(staged);
  if (!fs::exists(dir)) {
    if (::rename(staged.c_str(), dir.c_str()) != 0) io_fail(dir, "move " + staged + " into place", errno);
    sync_directory(parent_of(dir));
    return;
  }
#ifdef SYS_renameat2
  constexpr unsigned kExchange = 1u << 1;  // RENAME_EXCHANGE
  if (::syscall(SYS_renameat2, AT_FDCWD, staged.c_str(), AT_FDCWD, dir.c_str(), kExchange) == 0) {
    sync_directory(parent_of(dir));
    remove_tree(staged, ec);  // now the old content
    return;
  }
#endif
  // No atomic exchange here: two renames; recover_directory() mends a crash between them.
  const std::string old = dir + ".old";
  remove_tree(old, ec);
  if (::rename(dir.c_str(), old.c_str()) != 0) io_fail(dir, "move aside", errno);
  if (::rename(staged.c_str(), dir.c_str()) != 0) io_fail(dir, "move " + staged + " into place", errno);
  sync_directory(parent_of(dir));
  remove_tree(old, ec);
}

std::string recover_directory(const std::string& dir, const std::string& staged,
                              bool (*is_complete)(const std::string& folder), const OwnedNames& ours) {
  std::error_code ec;
  std::string done;
  const std::string old = dir + ".old";
  if (!fs::exists(dir)) {
    for (const std::string& candidate : {staged, old}) {
      if (fs::is_directory(candidate) && is_complete(candidate) &&
          ::rename(candidate.c_str(), dir.c_str()) == 0) {
        sync_directory(parent_of(dir));
        done = "recovered " + dir + " from " + candidate + " (a save was interrupted)";
        break;
      }
    }
  }
  for (const std::string& leftover : {staged, old}) {
    if (!fs::exists(leftover)) continue;
    if (const std::string foreign = first_foreign_entry(leftover, ours); !foreign.empty()) {
      done += (done.empty() ? "" : "; ") + std::string("left ") + leftover + " as it is (" + foreign +
              " was not written by nmt)";
      continue;
    }
    remove_tree(leftover, ec);
    done += (done.empty() ? "removed " : "; removed ") + leftover + " (left by an interrupted save)";
  }
  return done;
}

namespace {

// "model.pt.tmp.1234.5" -> "model.pt": the temporaries of AtomicFile.
std::string without_temp_suffix(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return name;
  size_t i = at + 5, dots = 0, digits = 0;
  for (; i < name.size(); ++i) {
    if (name[i] == '.') ++dots;
    else if (name[i] >= '0' && name[i] <= '9') ++digits;
    else return name;
  }
  return dots == 1 && digits >= 2 && name.back() != '.' ? name.substr(0, at) : name;
}

}  // namespace

std::string first_foreign_entry(const std::string& dir, const OwnedNames& ours) {
  std::error_code ec;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return "";  // missing: nothing to judge
  if (!S_ISDIR(st.st_mode)) return dir;           // a file or link where a folder of ours would be
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) names.insert(entry.path().filename().string());
  if (ec) return dir;  // unreadable: not ours to judge, so not ours to delete
  for (const std::string& name : names)
    if (!ours(without_temp_suffix(name))) return (fs::path(dir) / name).string();
  return "";
}

void remove_owned_tree(const std::string& dir, const OwnedNames& ours, const std::string& what) {
  const std::string foreign = first_foreign_entry(dir, ours);
  if (!foreign.empty())
    throw InputError(foreign + ": not written by nmt (" + dir + " should hold " + what + "); " + dir +
                     " left as it is: move it away or remove it yourself");
  std::error_code ec;
  remove_tree(dir, ec);
  if (ec) throw IoError(dir + ": cannot remove: " + ec.message());
}

void remove_tree(const std::string& path, std::error_code& ec) {
  ec.clear();
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) ec = std::error_code(errno, std::generic_category());
    return;
  }
  tree_error = 0;
  if (::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && tree_error == 0)
    tree_error = errno;
  if (tree_error != 0) ec = std::error_code(tree_error, std::generic_category());
}

}  // namespace nmt
