// A one-line progress bar redrawn in place on a terminal; nothing at all otherwise.
#include "rafter/collector/progress.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace rafter {

namespace {
Progress::Mode mode_from_environment() {
  const char* v = std::getenv("RAFTER_PROGRESS");
  const std::string_view mode = v ? v : "";
  if (mode == "lines") return Progress::Mode::Lines;
  if (mode == "off") return Progress::Mode::Off;
  return isatty(STDERR_FILENO) != 0 ? Progress::Mode::Bar : Progress::Mode::Off;
}
}  // namespace

Progress::Progress(std::string title, std::size_t total)
    : title_(std::move(title)), total_(total == 0 ? 1 : total), mode_(mode_from_environment()) {}

Progress::~Progress() { finish(); }

void Progress::step(const std::string& what) {
  ++done_;
  if (mode_ == Mode::Lines) {
    fmt::print(stderr, "{} {}/{} {}\n", title_, done_, total_, what);
    std::fflush(stderr);
  }
  if (mode_ != Mode::Bar) return;
  constexpr int kWidth = 28;
  const double frac = static_cast<double>(done_ > total_ ? total_ : done_) / static_cast<double>(total_);
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::string label = what.size() > 40 ? what.substr(0, 37) + "..." : what;
  fmt::print(stderr, "\r\033[2K{} [{}] {:3.0f}% {}", title_, bar, frac * 100, label);
  std::fflush(stderr);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ == Mode::Bar && done_ > 0) {
    fmt::print(stderr, "\r\033[2K");
    std::fflush(stderr);
  }
}

}  // namespace rafter
