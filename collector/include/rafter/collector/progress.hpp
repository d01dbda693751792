// A progress bar on stderr, drawn only when stderr is a terminal (silent in pipes, CI and tests).
// RAFTER_PROGRESS=lines prints one plain line per step instead (for logs, and for whoever must know
// how far a run got: a batch system, a test that interrupts mid-run); RAFTER_PROGRESS=off: nothing.
#pragma once
#include <cstddef>
#include <string>

namespace rafter {

class Progress {
 public:
  enum class Mode { Off, Bar, Lines };
  Progress(std::string title, std::size_t total);
  ~Progress();
  void step(const std::string& what);  // advance by one, showing what is being done now
  void finish();

 private:
  std::string title_;
  std::size_t total_;
  std::size_t done_ = 0;
  Mode mode_;
  bool finished_ = false;
};

}  // namespace rafter
