// The rank launch: the launcher's variables, MPI_Init/Finalize under a watchdog, joins with named
// missing ranks, deadline-bounded polls, and the test hook RAFTER_TEST_COMM_FAULT that makes one
// rank hang or exit at its K-th join ("hang:R:K", "exit:R:K"), for the fault tests.
#include "rafter/collector/ranks.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "rafter/collector/interrupt.hpp"
#include "rafter/collector/timing.hpp"

#if RAFTER_HAVE_MPI
#include <mpi.h>
#endif

namespace rafter {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && n >= 0) ? int(n) : fallback;
}

// Ends the process with one line when a blocking call (MPI_Init, MPI_Finalize) outlives its
// deadline: those calls cannot be polled, so a thread watches them.
class Watchdog {
 public:
  Watchdog(std::string line, double seconds) : line_(std::move(line)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
      std::fflush(stdout);
      fmt::print(stderr, "rafter: error: {}\n", line_);
      std::fflush(stderr);
      _exit(2);
    });
  }
  ~Watchdog() {
    {
      const std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string line_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

void maybe_fault(int rank, int join_index) {
  const char* spec = std::getenv("RAFTER_TEST_COMM_FAULT");
  if (spec == nullptr) return;
  char what[8] = {};
  int r = -1, k = -1;
  if (std::sscanf(spec, "%7[a-z]:%d:%d", what, &r, &k) != 3 || r != rank || k != join_index) return;
  if (std::string_view(what) == "exit") _exit(3);
  if (std::string_view(what) == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1000));
}

}  // namespace

RankInfo ranks_from_environment() {
  struct Vars {
    const char *launcher, *rank, *size, *local;
  };
  static constexpr Vars kVars[] = {
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"pmix", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}};
  RankInfo info;
  for (const Vars& v : kVars) {
    const int rank = env_int(v.rank, -1), size = env_int(v.size, -1);
    if (rank < 0 || size < 1 || rank >= size) continue;
    info = {rank, size, env_int(v.local, 0), true, v.launcher};
    break;
  }
  return info;
}

std::string rank_device(const std::string& device, const RankInfo& info) {
  if (info.size <= 1 || device.rfind("cuda", 0) != 0) return device;
  int first = 0;
  if (device.size() > 4) {
    if (device[4] != ':') return device;  // not a CUDA device name: left for the caller's error
    const char* b = device.c_str() + 5;
    char* end = nullptr;
    const long n = std::strtol(b, &end, 10);
    if (end == b || *end != '\0' || n < 0) return device;
    first = int(n);
  }
  return fmt::format("cuda:{}", first + info.local_rank);
}

bool mpi_built() {
#if RAFTER_HAVE_MPI
  return true;
#else
  return false;
#endif
}

RankGroup rank_group(int world_rank, int world_size, int n, int stride) {
  if (n < 1 || stride < 1)
    throw InputError(fmt::format("ranks={} stride={}: both must be positive", n, stride));
  if (n > world_size)
    throw InputError(fmt::format("ranks={} but the run has {} rank(s) (mpirun -np {})", n, world_size, n));
  if (world_size % (n * stride) != 0)
    throw InputError(
        fmt::format("ranks={} stride={}: the run's {} rank(s) do not form groups of {} ranks {} apart "
                    "(mpirun -np must be a multiple of {})",
                    n, stride, world_size, n, stride, n * stride));
  RankGroup g;
  g.size = n;
  g.stride = stride;
  g.rank = (world_rank / stride) % n;
  g.color = (world_rank / (n * stride)) * stride + world_rank % stride;
  return g;
}

std::string describe_groups(const RankGroup& group, int world_size) {
  return fmt::format("{} groups of {} ranks {} apart in a world of {}, timed together",
                     world_size / group.size, group.size, group.stride, world_size);
}

std::string bytes_label(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return bytes == double(std::int64_t(bytes)) ? fmt::format("{} {}", std::int64_t(bytes), kUnits[u])
                                              : fmt::format("{:.3g} {}", bytes, kUnits[u]);
}

Ranks& Ranks::world() {
  static Ranks ranks;
  return ranks;
}

Ranks::Ranks() : info_(ranks_from_environment()) {
  if (const char* t = std::getenv("RAFTER_COMM_TIMEOUT")) set_timeout_seconds(std::atof(t));
#if RAFTER_HAVE_MPI
  if (!info_.launched) return;
  const Watchdog watch(fmt::format("rank {}: MPI_Init did not return within {} s", info_.rank, timeout_), timeout_);
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &info_.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &info_.size);
  mpi_ = true;
#else
  if (info_.launched && info_.size > 1)  // N copies that cannot talk would each take the world for theirs
    throw InputError(fmt::format("launched as rank {} of {} ({}), but rafter was built without MPI "
                                 "(install libopenmpi-dev and rebuild)",
                                 info_.rank, info_.size, info_.launcher));
#endif
}

Ranks::~Ranks() {
#if RAFTER_HAVE_MPI
  if (!mpi_ || broken_ || interrupt_requested()) return;  // the peers may be gone: mpirun ends them
  const Watchdog watch(fmt::format("rank {}: MPI_Finalize did not return within {} s", info_.rank, timeout_), timeout_);
  MPI_Finalize();
#endif
}

void Ranks::set_timeout_seconds(double seconds) {
  if (!(seconds > 0)) throw InputError(fmt::format("--comm-timeout {}: must be a positive number of seconds", seconds));
  timeout_ = seconds;
}

void Ranks::timed_out(std::string message) {
  broken_ = true;
  throw CommTimeout(message);
}

void Ranks::wait(std::string_view what, const std::function<bool()>& done) {
  const double deadline = now_seconds() + timeout_;
  while (!done()) {
    throw_if_interrupted();
    if (now_seconds() > deadline)
      timed_out(fmt::format("{} did not complete within {} s on rank {} (a rank stopped mid-collective)", what,
                            timeout_, info_.rank));
  }
}

#if RAFTER_HAVE_MPI
namespace {
constexpr int kJoinTag = 0x7af7;
bool test(MPI_Request& r) {
  int flag = 0;
  MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
  return flag != 0;
}
}  // namespace

void Ranks::join(std::string_view what) {
  maybe_fault(info_.rank, joins_);
  const int seq = joins_++;
  if (!mpi_ || info_.size == 1) return;
  std::vector<MPI_Request> sends(info_.size, MPI_REQUEST_NULL), recvs(info_.size, MPI_REQUEST_NULL);
  std::vector<int> got(info_.size, -1);
  for (int p = 0; p < info_.size; ++p) {
    if (p == info_.rank) continue;
    MPI_Isend(&seq, 1, MPI_INT, p, kJoinTag, MPI_COMM_WORLD, &sends[p]);
    MPI_Irecv(&got[p], 1, MPI_INT, p, kJoinTag, MPI_COMM_WORLD, &recvs[p]);
  }
  const double deadline = now_seconds() + timeout_;
  for (;;) {
    std::vector<int> missing;
    for (int p = 0; p < info_.size; ++p)
      if (recvs[p] != MPI_REQUEST_NULL && !test(recvs[p])) missing.push_back(p);
    if (missing.empty()) break;
    throw_if_interrupted();
    if (now_seconds() > deadline)
      timed_out(fmt::format("rank{} {} did not join {} within {} s", missing.size() > 1 ? "s" : "",
                            fmt::join(missing, ", "), what, timeout_));
  }
  wait(what, [&] {
    int flag = 0;
    MPI_Testall(int(sends.size()), sends.data(), &flag, MPI_STATUSES_IGNORE);
    return flag != 0;
  });
}

void Ranks::broadcast(void* data, std::size_t bytes, int root, std::string_view what) {
  if (!mpi_ || info_.size == 1) return;
  MPI_Request r;
  MPI_Ibcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &r);
  wait(what, [&] { return test(r); });
}

std::vector<double> Ranks::all_gather(std::span<const double> mine, std::string_view what) {
  std::vector<double> all(mine.size() * std::size_t(info_.size));
  if (!mpi_ || info_.size == 1) return {mine.begin(), mine.end()};
  MPI_Request r;
  MPI_Iallgather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()), MPI_DOUBLE,
                 MPI_COMM_WORLD, &r);
  wait(what, [&] { return test(r); });
  return all;
}

void Ranks::barrier(std::string_view what) {
  if (!mpi_ || info_.size == 1) return;
  MPI_Request r;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  wait(what, [&] { return test(r); });
}

const void* Ranks::communicator(const RankGroup& group) {
  static const MPI_Comm world = MPI_COMM_WORLD;
  if (!mpi_ || group.size >= info_.size) return &world;
  std::shared_ptr<void>& slot = groups_[{group.size, group.stride}];
  if (!slot) {
    auto comm = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
    if (MPI_Comm_split(MPI_COMM_WORLD, group.color, group.rank, comm.get()) != MPI_SUCCESS)
      throw InputError(fmt::format("rank {}: MPI_Comm_split into groups of {} ranks {} apart failed",
                                   info_.rank, group.size, group.stride));
    MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
    slot = comm;
  }
  return slot.get();
}
#else
const void* Ranks::communicator(const RankGroup&) { return nullptr; }
void Ranks::join(std::string_view) { maybe_fault(info_.rank, joins_++); }
void Ranks::broadcast(void*, std::size_t, int, std::string_view) {}
std::vector<double> Ranks::all_gather(std::span<const double> mine, std::string_view) { return {mine.begin(), mine.end()}; }
void Ranks::barrier(std::string_view) {}
#endif

}  // namespace rafter
