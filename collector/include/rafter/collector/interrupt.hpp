// Interrupts during a measurement: while an InterruptScope lives, the first SIGINT or SIGTERM only
// asks the run to stop (the measurement in progress is abandoned at its next repeat, what finished
// is written, the file is marked interrupted); a second one exits at once. Outside a scope the
// signals keep their default action: reading and drawing commands have nothing to save.
#pragma once
#include <string>

namespace rafter {

// Thrown by the measurement loops when a stop was asked for. Deliberately not a std::exception,
// so that the handlers that turn a backend's failure into a failed record let it pass.
struct Interrupted {
  int signal = 0;
};

class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// 0 when no stop was asked for, else the signal that asked (SIGINT, SIGTERM); reset when the
// outermost scope ends.
int interrupt_signal();
bool interrupt_requested();
// Throws Interrupted when a stop was asked for: called between repeats, probes and operators.
void throw_if_interrupted();
// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);
// The exit status a shell gives a process ended by `signal` (128 + N).
int interrupted_exit_code(int signal);

}  // namespace rafter
