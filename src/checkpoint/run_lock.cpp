#include "checkpoint/run_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// The whole file, for an exclusive lock.
struct flock whole_file(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;
  return fl;
}

std::string read_fd(int fd) {
  std::string text;
  char buf[512];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    at += n;
    if (text.size() > 4096) break;  // the holder's line, never a log
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

// "pid 4242 on host since 2026-11-24 15:40:01: nmt train --config …"
std::string holder_line() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[32] = "?";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  if (::localtime_r(&now, &tm)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  std::string command;
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(cmdline, arg, '\0')) {
    if (!command.empty()) command += ' ';
    command += arg == "" ? "''" : arg;
  }
  if (command.size() > 300) command = command.substr(0, 300) + " …";
  std::ostringstream line;
  line << "pid " << ::getpid() << " on " << host << " since " << when << ": " << command << "\n";
  return line.str();
}

std::string lock_path(const std::string& run_dir) { return (fs::path(run_dir) / kRunLockFile).string(); }

}  // namespace

RunLock::RunLock(const std::string& run_dir) {
  const std::string path = lock_path(run_dir);
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw IoError(run_dir + ": cannot create the run folder: " + ec.message());
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError(path + ": cannot open the run's lock file: " + std::strerror(errno));
  struct flock fl = whole_file(F_WRLCK);
  if (::fcntl(fd_, F_OFD_SETLK, &fl) != 0) {
    const int err = errno;
    std::string holder = (err == EAGAIN || err == EACCES) ? read_fd(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (err != EAGAIN && err != EACCES)
      throw IoError(path + ": cannot lock: " + std::strerror(err));
    throw InputError(run_dir + ": another nmt train is writing this run folder (" +
                     (holder.empty() ? std::string("it is starting up") : holder) +
                     "); wait for it to finish or stop it, or train into another folder "
                     "(--set train.checkpoint_dir=DIR)");
  }
  // Ours now: say who we are, for the next one that asks.
  const std::string line = holder_line();
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    // The lock holds without its text; only the message of a second trainer is poorer.
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

std::string run_lock_holder(const std::string& run_dir) {
  const int fd = ::open(lock_path(run_dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct flock fl = whole_file(F_WRLCK);
  std::string holder;
  if (::fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) {
    holder = read_fd(fd);
    if (holder.empty()) holder = "a trainer starting up";
  }
  ::close(fd);
  return holder;
}

}  // namespace nmt
