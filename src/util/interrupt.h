// SIGINT/SIGTERM as the commands handle them: the first one asks the
// running command to stop at a safe point (training: after the current
// step, with last/ saved; serving: the requests already read); a second
// SIGINT while it finishes only says so;
// a third aborts at once. Commands poll interrupted() at their safe points.
#pragma once

#include <stdexcept>

namespace nmt {

// `finishing` names what the command completes after the first signal, as
// the signal's message says it ("the current step" when training).
void install_interrupt_handlers(const char* finishing = "the current step");

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
