// One writer per run folder. `nmt train` holds a lock on RUN/train.lock for
// as long as it runs; a second trainer (or a `--resume` of the same run)
// is refused, naming the process that holds it.
//
// The lock is an open-file-description lock (fcntl F_OFD_SETLK): the kernel
// drops it when the holder's last descriptor closes, however the process
// ends (SIGKILL, OOM kill, power loss on a local disk), so a stale lock
// cannot exist and nothing ever has to remove one. The file's text (pid,
// host, start time, command line) is only there for the message; the lock
// file itself is never deleted, since a new file under the same name would
// let two holders lock two different files.
// Plain C++17 (no LibTorch).
#pragma once

#include <string>

namespace nmt {

constexpr const char* kRunLockFile = "train.lock";

class RunLock {
 public:
  // Creates run_dir if needed and takes its lock; InputError naming the
  // holder when another process has it.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// Who holds run_dir's lock right now ("pid 4242 on host since …: nmt train …"),
// or "" when nobody does. For readers: it opens the lock file read-only,
// creates nothing, and takes no lock, so it can never delay a trainer.
std::string run_lock_holder(const std::string& run_dir);

}  // namespace nmt
