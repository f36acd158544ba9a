// Temporary folders and files for tests. temp_dir(name) is a fresh empty
// folder of this test process, <system temp>/nmt_test_<pid>_<name>, removed
// with its content when the process exits (kept when KEEP is set in the
// environment, as tests/lib.sh does for the shell tests); children started
// with fork_child (process.h) leave it alone.
#pragma once

#include <string>

namespace nmt::testing {

std::string temp_dir(const std::string& name);

// The whole content of a file (bytes as they are), "" when it cannot be read.
std::string slurp(const std::string& path);

}  // namespace nmt::testing
