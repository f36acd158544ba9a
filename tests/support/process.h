// Processes started by tests: a program with extra environment (spawn), a
// function run in a forked copy of the test (fork_child), a shell command
// whose output is wanted (run_capture); and waiting for them with a deadline.
// A Process still running when it goes out of scope (a failed ASSERT) is
// SIGKILLed and reaped, so no test leaves a child behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace nmt::testing {

struct Process {
  pid_t pid = -1;   // -1 once it has been reaped
  std::string log;  // where its stderr goes ("" when inherited)

  Process() = default;
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();
};

// Starts argv[0] (a path) with `argv`, in this process's environment plus
// `env` (NAME=VALUE entries, which replace inherited ones of the same name),
// with stderr to `log` (created or truncated) unless it is "". Throws
// std::runtime_error when the program cannot be started.
Process spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
              const std::string& log = "");

// Runs `child` in a forked copy of this process, which then exits with what
// it returned (125 when it threw) without running destructors or atexit
// handlers (so it removes no temp_dir of the test). Throws when fork fails.
Process fork_child(const std::function<int()>& child);

// Waits up to `limit` for `p` to end: its wait status, or -1 when it was
// still running (it is then SIGKILLed and reaped).
int wait_for(Process& p, std::chrono::seconds limit);

// SIGKILLs `p` and reaps it; returns its wait status.
int kill_and_wait(Process& p);

// Runs `command` with /bin/sh and returns what it wrote to stdout; *status
// is its wait status (-1 when it could not be started).
std::string run_capture(const std::string& command, int* status);

}  // namespace nmt::testing
