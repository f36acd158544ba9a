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

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitInput = 2;

}  // namespace nmt
