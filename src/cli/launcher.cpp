#include "cli/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "util/errors.h"

extern char** environ;

namespace nmt::cli {

namespace {

volatile std::sig_atomic_t g_signal = 0;  // the last SIGINT/SIGTERM the launcher received

void on_signal(int sig) { g_signal = sig; }

// A port nobody listens on right now (the ranks' store binds it moments
// later), below the kernel's ephemeral range (ip_local_port_range, 32768 and
// up by default): a rank that connects before the store listens is given an
// ephemeral source port, and when that is the store's own port, Linux
// connects the socket to itself and the store cannot bind it (seen: rank 0
// "failed to bind ... Address already in use", and the group never started).
int free_port() {
  std::random_device seed;
  std::mt19937 pick(seed());
  std::uniform_int_distribution<int> port(20000, 32767);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error(std::string("launcher: socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port(pick)));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return ntohs(addr.sin_port);
  }
  throw std::runtime_error("launcher: no free local port in 20000-32767 after 200 tries");
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) +
                                  " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

}  // namespace

namespace {

// How one start of the group ended.
struct GroupEnd {
  int code = 0;           // the launcher's exit code for it
  bool interrupted = false;  // a SIGINT/SIGTERM reached the launcher
  std::string cause;      // "rank 1 was killed by signal 9 (Killed)", or ""
};

// Starts the ranks once (restart: TORCHELASTIC_RESTART_COUNT for them) and
// watches them until every one has ended.
GroupEnd run_group(int nproc, std::vector<char*>& child_argv, int restart) {
  const int port = free_port();
  spdlog::info("launcher: {} ranks on 127.0.0.1:{}{}", nproc, port,
               restart > 0 ? fmt::format(" (restart {})", restart) : "");
  std::vector<pid_t> pids(nproc, -1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A rank starts with SIGINT/SIGTERM unblocked (the launcher's own thread
  // blocks them: util/interrupt.h), then routes them as every nmt does.
  sigset_t no_signals;
  sigemptyset(&no_signals);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);  // the first rank leads a new group; the others join it
  for (int r = 0; r < nproc; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('='));
      if (key == "MASTER_ADDR" || key == "MASTER_PORT" || key == "WORLD_SIZE" || key == "RANK" ||
          key == "LOCAL_RANK" || key == "TORCHELASTIC_RESTART_COUNT")
        continue;
      env.push_back(kv);
    }
    env.insert(env.end(), {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                           "WORLD_SIZE=" + std::to_string(nproc), "RANK=" + std::to_string(r),
                           "LOCAL_RANK=" + std::to_string(r),
                           "TORCHELASTIC_RESTART_COUNT=" + std::to_string(restart)});
    std::vector<char*> envp;
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    if (r > 0) posix_spawnattr_setpgroup(&attr, pids[0]);
    const int err = posix_spawn(&pids[r], "/proc/self/exe", nullptr, &attr, child_argv.data(), envp.data());
    if (err != 0) {
      for (int k = 0; k < r; ++k) ::kill(pids[k], SIGTERM);
      throw std::runtime_error(std::string("launcher: cannot start rank ") + std::to_string(r) + ": " +
                               std::strerror(err));
    }
  }
  posix_spawnattr_destroy(&attr);

  // Watch: the first failure stops the others (SIGTERM, then SIGKILL after a grace period).
  GroupEnd end;
  int running = nproc, forwarded = 0;
  bool failed = false;
  std::chrono::steady_clock::time_point kill_at{};
  while (running > 0) {
    if (g_signal && g_signal != forwarded) {
      forwarded = g_signal;
      end.interrupted = true;
      spdlog::info("launcher: passing {} on to the ranks", g_signal == SIGINT ? "SIGINT" : "SIGTERM");
      for (pid_t p : pids)
        if (p > 0) ::kill(p, g_signal);
      g_signal = 0;
    }
    // Ranks that ended since the last look, all of them: when one dies, a
    // peer fails at its next exchange with it, often within the same 50 ms,
    // and the report should name the cause, not the consequence.
    struct Ended {
      int rank;
      int status;
    };
    std::vector<Ended> ended;
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      --running;
      int rank = 0;
      while (rank < nproc && pids[rank] != pid) ++rank;
      if (rank < nproc) pids[rank] = -1;
      ended.push_back({rank, status});
    }
    if (!ended.empty()) {
      // A rank killed by a signal is the likelier cause than one that exited
      // with an error (a rank that loses a peer exits with an error).
      const Ended* cause = nullptr;
      for (const Ended& e : ended) {
        if (WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0) continue;
        if (!cause || (WIFSIGNALED(e.status) && !WIFSIGNALED(cause->status))) cause = &e;
      }
      if (cause && !failed) {
        failed = true;
        end.code = exit_code(cause->status);
        end.cause = "rank " + std::to_string(cause->rank) + " " + describe(cause->status);
        if (running > 0) {
          spdlog::error("launcher: {}; stopping the other ranks", end.cause);
          for (pid_t p : pids)
            if (p > 0) ::kill(p, SIGTERM);
          kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        } else {
          spdlog::error("launcher: {}", end.cause);
        }
      }
      continue;
    }
    if (failed && running > 0 && std::chrono::steady_clock::now() > kill_at) {
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
      kill_at = std::chrono::steady_clock::now() + std::chrono::hours(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return end;
}

}  // namespace

int launch_local_ranks(int nproc, int max_restarts, int argc, char** argv) {
  // The ranks' command line: ours without --nproc and --max-restarts, with
  // --threads cores/N unless the user chose.
  std::vector<std::string> args;
  bool has_threads = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc" || a == "--max-restarts") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0 || a.rfind("--max-restarts=", 0) == 0) continue;
    if (a == "--threads" || a.rfind("--threads=", 0) == 0) has_threads = true;
    args.push_back(a);
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!has_threads) args.insert(args.end(), {"--threads", std::to_string(std::max(1, cores / nproc))});
  std::vector<char*> child_argv;
  for (auto& a : args) child_argv.push_back(a.data());
  child_argv.push_back(nullptr);
  if (!has_threads) spdlog::info("launcher: {} threads per rank", std::max(1, cores / nproc));

  // Signals: the ranks run in their own process group, so a Ctrl-C on the
  // terminal reaches the launcher only, which passes it on once.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  for (int restart = 0;; ++restart) {
    const GroupEnd end = run_group(nproc, child_argv, restart);
    // Done, stopped on purpose, or refused for its input (a restart would
    // only be refused again): the launcher ends as the group did.
    if (end.code == 0 || end.interrupted || end.code == kExitInput || restart >= max_restarts) {
      if (end.code != 0 && !end.interrupted && end.code != kExitInput && max_restarts > 0)
        spdlog::error("launcher: giving up after {} restart{}", restart, restart == 1 ? "" : "s");
      return end.code;
    }
    spdlog::warn("launcher: restart {} of {}: {}; starting {} rank{} again from the last checkpoint",
                 restart + 1, max_restarts, end.cause, nproc, nproc == 1 ? "" : "s");
  }
}

}  // namespace nmt::cli
