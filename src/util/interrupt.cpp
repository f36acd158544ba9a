#include "util/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <string>
#include <thread>

namespace nmt {

namespace {

volatile std::sig_atomic_t g_first = 0;  // the first signal received
volatile std::sig_atomic_t g_count = 0;  // how many
// The first signal's messages, composed before any signal can arrive (the
// handler may only write).
std::string g_interrupted_text, g_terminated_text, g_second_text;

void say(const char* text) {
  // async-signal-safe output
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void on_signal(int sig) {
  if (g_first == 0) g_first = sig;
  g_count = g_count + 1;
  if (g_count == 1) {
    say(sig == SIGINT ? g_interrupted_text.c_str() : g_terminated_text.c_str());
  } else if (g_count == 2) {
    say(g_second_text.c_str());
  } else {
    say("nmt: aborted\n");
    ::_exit(128 + g_first);
  }
}

sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void take_signals_on_own_thread() {
  const sigset_t set = interrupt_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    ::pthread_setname_np(::pthread_self(), "nmt-signals");
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    for (;;) ::pause();  // each signal runs its handler here (or ends the process)
  }).detach();
}

void unblock_interrupt_signals() {
  const sigset_t set = interrupt_signals();
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

void install_interrupt_handlers(const char* first, const char* second) {
  g_interrupted_text = std::string("\nnmt: interrupted; ") + first + " (Ctrl-C twice more to abort)\n";
  g_terminated_text = std::string("\nnmt: terminated; ") + first + "\n";
  g_second_text = std::string("nmt: ") + second + "\n";
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

int interrupt_signal() { return g_first; }

Interrupted::Interrupted(int signal)
    : std::runtime_error(signal == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)"),
      signal_(signal) {}

}  // namespace nmt
