// One measuring run per output file: two runs writing one path would both measure a machine the
// other is loading, and the later rename would silently discard the earlier run. The second run
// fails at once with a line naming the first one's process.
#pragma once
#include <filesystem>

namespace rafter {

// Holds an exclusive advisory lock (flock) on `.<name>.lock` beside `path` for its lifetime; the
// kernel drops it if the process dies, so a stale lock file never blocks a later run. Throws
// InputError "'<path>' is being written by another rafter run (pid N)" when the lock is held.
class OutputLock {
 public:
  explicit OutputLock(const std::filesystem::path& path);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::filesystem::path lock_path_;
  int fd_ = -1;
};

}  // namespace rafter
