// A progress bar on stderr, drawn only when stderr is a terminal (silent in pipes, CI and tests).
#pragma once
#include <cstddef>
#include <string>

namespace rafter {

class Progress {
 public:
  Progress(std::string title, std::size_t total);
  ~Progress();
  void step(const std::string& what);  // advance by one, showing what is being done now
  void finish();

 private:
  std::string title_;
  std::size_t total_;
  std::size_t done_ = 0;
  bool enabled_;
  bool finished_ = false;
};

}  // namespace rafter
