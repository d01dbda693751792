// OutputLock: flock on a lock file beside the output, checked to still be the file on disk (a
// holder that unlinks it on release must not leave two runs each holding a lock on a different inode).
#include "rafter/collector/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/core.h>
#include <string>

#include "rafter/collector/error.hpp"

namespace rafter {
namespace fs = std::filesystem;

namespace {

std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

bool same_file(int fd, const fs::path& path) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

OutputLock::OutputLock(const fs::path& path) {
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  lock_path_ = dir / fmt::format(".{}.lock", path.filename().string());
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw InputError(fmt::format("cannot write '{}': its lock file '{}': {}", path.string(), lock_path_.string(),
                                   std::strerror(errno)));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const std::string pid = holder_pid(fd);
      ::close(fd);
      throw InputError(fmt::format("'{}' is being written by another rafter run (pid {}); wait for it or choose "
                                   "another output",
                                   path.string(), pid));
    }
    if (!same_file(fd, lock_path_)) {  // the previous holder removed it between our open and flock
      ::close(fd);
      continue;
    }
    const std::string pid = fmt::format("{}\n", ::getpid());
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
      // The lock holds without the pid; the message of a second run then says "pid unknown".
    }
    fd_ = fd;
    return;
  }
  throw InputError(fmt::format("cannot lock '{}': its lock file keeps changing", path.string()));
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // while still holding it: a waiting opener sees a different inode
  ::close(fd_);
}

}  // namespace rafter
