// Signal handlers for measuring commands: an atomic flag on the first signal, _exit on the second.
#include "rafter/collector/interrupt.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

namespace rafter {
namespace {

std::atomic<int> g_signal{0};
std::atomic<int> g_scopes{0};
struct sigaction g_old_int{}, g_old_term{};

void on_signal(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) _exit(interrupted_exit_code(sig));  // second signal
  // Only async-signal-safe calls here: one write(2) of a constant line.
  static constexpr char kLine[] =
      "\nrafter: interrupted: stopping after the current repeat and writing what finished "
      "(signal again to exit at once)\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
}

}  // namespace

InterruptScope::InterruptScope() {
  if (g_scopes.fetch_add(1) != 0) return;  // nested scopes share the outer handlers
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking reads and waits resume; the loops poll the flag
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptScope::~InterruptScope() {
  if (g_scopes.fetch_sub(1) != 1) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  g_signal = 0;  // measuring after the scope (a library caller's next run) starts afresh
}

int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }
bool interrupt_requested() { return interrupt_signal() != 0; }

void throw_if_interrupted() {
  if (const int sig = interrupt_signal(); sig != 0) throw Interrupted{sig};
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return fmt::format("signal {}", signal);
  }
}

int interrupted_exit_code(int signal) { return 128 + signal; }

}  // namespace rafter
