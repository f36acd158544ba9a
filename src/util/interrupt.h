// SIGINT/SIGTERM as the commands handle them: the first one asks the
// running command to stop at a safe point (training: after the current
// step, with last/ saved; translating: at the next batch, writing no
// output file; serving: after the requests already read); a second
// SIGINT while it finishes only says so;
// a third aborts at once. Commands poll interrupted() at their safe points.
#pragma once

#include <stdexcept>

namespace nmt {

// Called in main() before any thread starts: SIGINT and SIGTERM are
// blocked in the calling thread, so every thread started after it (OpenMP's
// team, oneDNN's, the batch prefetcher, the service's) inherits the block,
// and one thread of their own ("nmt-signals") takes them, doing nothing
// else. Why: oneDNN's JIT float32 GEMM kernels before 3.11 move the stack
// pointer into a heap workspace while they run (uxlfoundation/oneDNN#4845);
// a handler run on such a thread writes the signal's frame over the heap,
// and a Ctrl-C during training aborted one run in five with "corrupted size
// vs. prev_size". The handlers below keep their meaning whichever thread
// runs them. Threads a library starts as it loads (OpenBLAS's workers) keep
// the signals open; none of them runs oneDNN.
void take_signals_on_own_thread();

// For a child process (after fork, before it runs anything): SIGINT and
// SIGTERM unblocked again. Async-signal-safe.
void unblock_interrupt_signals();

// What the command does after the first signal, as the signal's message
// says it after "nmt: interrupted; " (training: it finishes the current step
// and saves), and what a second SIGINT is told while it does.
void install_interrupt_handlers(
    const char* first = "finishing the current step, then saving",
    const char* second = "still finishing and saving; Ctrl-C once more aborts without saving");

// 0, or the first of SIGINT/SIGTERM received.
int interrupt_signal();
inline bool interrupted() { return interrupt_signal() != 0; }

// Thrown at a safe point once a signal came in; main() exits 128 + signal.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }

 private:
  int signal_;
};

inline void throw_if_interrupted() {
  if (const int s = interrupt_signal()) throw Interrupted(s);
}

}  // namespace nmt
