// A one-line progress bar redrawn in place on a terminal; nothing at all otherwise.
#include "rafter/collector/progress.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>

namespace rafter {

Progress::Progress(std::string title, std::size_t total)
    : title_(std::move(title)), total_(total == 0 ? 1 : total), enabled_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() { finish(); }

void Progress::step(const std::string& what) {
  ++done_;
  if (!enabled_) return;
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
  if (enabled_ && done_ > 0) {
    fmt::print(stderr, "\r\033[2K");
    std::fflush(stderr);
  }
}

}  // namespace rafter
