#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace nmt::testing {

Process::Process(Process&& other) noexcept : pid(other.pid), log(std::move(other.log)) { other.pid = -1; }

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (pid > 0) kill_and_wait(*this);
    pid = other.pid;
    log = std::move(other.log);
    other.pid = -1;
  }
  return *this;
}

Process::~Process() {
  if (pid > 0) kill_and_wait(*this);
}

Process spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& log) {
  std::vector<std::string> entries = env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('=') + 1);
    bool replaced = false;
    for (const auto& mine : env) replaced = replaced || mine.compare(0, name.size(), name) == 0;
    if (!replaced) entries.push_back(kv);
  }
  std::vector<char*> envp, args;
  for (auto& kv : entries) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::vector<std::string> a = argv;
  for (auto& s : a) args.push_back(s.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log.empty())
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Process p;
  p.log = log;
  const int err = posix_spawn(&p.pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    p.pid = -1;
    throw std::runtime_error("cannot start " + argv.at(0) + ": " + std::strerror(err));
  }
  return p;
}

Process fork_child(const std::function<int()>& child) {
  Process p;
  p.pid = ::fork();
  if (p.pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (p.pid == 0) {
    int code = 125;
    try {
      code = child();
    } catch (...) {
    }
    ::_exit(code);
  }
  return p;
}

int wait_for(Process& p, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
      p.pid = -1;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill_and_wait(p);
  return -1;
}

int kill_and_wait(Process& p) {
  int status = 0;
  if (p.pid <= 0) return status;
  ::kill(p.pid, SIGKILL);
  ::waitpid(p.pid, &status, 0);
  p.pid = -1;
  return status;
}

std::string run_capture(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[256];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *status = pclose(p);
  return out;
}

}  // namespace nmt::testing
