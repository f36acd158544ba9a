// Error kinds that map to the process exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace nmt {

// Bad usage, config, data, checkpoint or command line: exit code 2.
// The message is one line naming the file/key/line and what is wrong.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file could not be written or read for a reason outside the input's
// content (disk full, read-only folder, permission): exit code 1. The message
// is one line naming the path.
class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitInput = 2;
// nmt check-po: the catalog has placeholder faults (not a failure of nmt's).
constexpr int kExitFaultsFound = 3;

}  // namespace nmt
