// InterruptScope: the first signal only sets a flag that the measurement loops turn into an
// Interrupted throw; handlers exist only while a scope lives. (A second signal's _exit and the
// files an interrupted run writes are tested end to end in tests/cli/test_interrupt_cli.cpp.)
#include <gtest/gtest.h>

#include <csignal>

#include "rafter/collector/interrupt.hpp"
#include "rafter/collector/timing.hpp"

namespace {

void (*current_handler(int sig))(int) {
  struct sigaction sa {};
  sigaction(sig, nullptr, &sa);
  return sa.sa_handler;
}

TEST(Interrupt, FirstSignalSetsAFlagThatTheRepeatLoopThrows) {
  const auto before = current_handler(SIGINT);
  {
    rafter::InterruptScope scope;
    EXPECT_FALSE(rafter::interrupt_requested());
    EXPECT_NO_THROW(rafter::throw_if_interrupted());
    int runs = 0;
    rafter::RepeatPolicy policy;
    policy.warmup = 0, policy.min_repeats = 5, policy.max_repeats = 5;
    try {
      rafter::measure_seconds(policy, [&] {
        if (++runs == 2) std::raise(SIGTERM);  // handled: the process lives on
      });
      ADD_FAILURE() << "measure_seconds ran to the end";
    } catch (const rafter::Interrupted& e) {
      EXPECT_EQ(e.signal, SIGTERM);
    }
    EXPECT_EQ(runs, 2);  // abandoned at the next repeat
    EXPECT_EQ(rafter::interrupt_signal(), SIGTERM);
    EXPECT_EQ(rafter::signal_name(rafter::interrupt_signal()), "SIGTERM");
    EXPECT_EQ(rafter::interrupted_exit_code(SIGINT), 130);
    {
      rafter::InterruptScope nested;  // shares the outer handlers and flag
      EXPECT_TRUE(rafter::interrupt_requested());
    }
    EXPECT_NE(current_handler(SIGINT), before);  // still the scope's handler
  }
  EXPECT_EQ(current_handler(SIGINT), before);  // restored when the last scope ends
  EXPECT_EQ(current_handler(SIGTERM), SIG_DFL);
  EXPECT_FALSE(rafter::interrupt_requested());  // and the next measurement starts afresh
}

TEST(Interrupt, InterruptedIsNotAStdException) {
  // So that the handlers turning a backend's std::exception into a failed record let it pass.
  bool passed_through = false;
  try {
    try {
      throw rafter::Interrupted{SIGINT};
    } catch (const std::exception&) {
      ADD_FAILURE() << "caught as std::exception";
    }
  } catch (const rafter::Interrupted&) {
    passed_through = true;
  }
  EXPECT_TRUE(passed_through);
}

}  // namespace
