// The rank launch shared by the MPI and NCCL collectives: which rank of how many this process is
// (under mpirun MPI is initialized on first use; run alone it is rank 0 of 1), the broadcast of an
// opaque id (NCCL's unique id), and bounded waits: every wait for the other ranks has a deadline
// (--comm-timeout), past which the run ends with one line naming the rank that did not join and
// the collective it was waited for (CommTimeout, exit 2).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rafter/collector/error.hpp"
#include "rafter/collector/timing.hpp"

namespace rafter {

// A rank did not join, or a collective did not complete, within the deadline. The peers may be
// gone: MPI is not finalized after it (mpirun ends the other ranks when this one exits).
class CommTimeout : public InputError {
 public:
  using InputError::InputError;
};

// What the launcher's environment says (Open MPI, PMIx, MPICH/Hydra, Slurm), without MPI_Init.
struct RankInfo {
  int rank = 0, size = 1, local_rank = 0;
  bool launched = false;   // started by a launcher with more than nothing in its variables
  std::string launcher;    // "openmpi", "pmix", "pmi", "slurm", "" alone
};
RankInfo ranks_from_environment();

// The device this rank drives. Launched as several ranks, "cuda" and "cuda:N" name the node's first
// GPU and each rank takes the one local_rank places after it (one process per GPU, as its NCCL
// communicator does): rank 1 of `mpirun -np 2 rafter profile --device cuda --tp 2` runs its shard on
// cuda:1. Anything else ("cpu"), and a lone rank, keeps the name.
std::string rank_device(const std::string& device, const RankInfo& info);

// True when rafter was built with MPI (the CPU collectives and the mpirun launch exist).
bool mpi_built();

// A communicator of n ranks inside an mpirun world of W: the world cut into W/n groups of n whose
// members are `stride` ranks apart. Stride 1 groups consecutive ranks (Megatron's tensor-parallel
// groups, rank = dp·tp + t); stride tp groups the data-parallel ranks of a TP×DP grid. `color` is
// the group's index, `rank` this rank's place in it. n = W is the world itself.
struct RankGroup {
  int size = 1, rank = 0, stride = 1, color = 0;
};
// Throws InputError naming the problem where W is not a multiple of n·stride (n > W: "ranks=4 but
// the run has 2 rank(s) (mpirun -np 4)").
RankGroup rank_group(int world_rank, int world_size, int n, int stride = 1);
// "2 groups of 2 ranks 2 apart in a world of 4, timed together" (a record's details.groups).
std::string describe_groups(const RankGroup& group, int world_size);

class Ranks {
 public:
  static constexpr double kDefaultTimeoutSeconds = 60;
  // The world: MPI_Init (under a watchdog) on the first call when launched and MPI is built in.
  static Ranks& world();

  int rank() const { return info_.rank; }
  int size() const { return info_.size; }
  int local_rank() const { return info_.local_rank; }
  bool mpi() const { return mpi_; }  // MPI initialized: the ranks can talk
  const RankInfo& info() const { return info_; }
  double timeout_seconds() const { return timeout_; }
  void set_timeout_seconds(double seconds);

  // Every rank announces that it reached `what` ("all_reduce (16 MiB)"); returns when all did.
  // Past the deadline: CommTimeout "rank R did not join WHAT within T s".
  void join(std::string_view what);
  // Polls `done` (an MPI_Test, a CUDA stream query) until true; past the deadline CommTimeout
  // "WHAT did not complete within T s on rank R". A stop request (Ctrl-C, mpirun's SIGTERM when a
  // peer died) throws Interrupted, so the finished records are kept.
  void wait(std::string_view what, const std::function<bool()>& done);
  // Root's `bytes` to every rank (NCCL's unique id); bounded like wait.
  void broadcast(void* data, std::size_t bytes, int root, std::string_view what);
  // Every rank's values, rank-major (each rank the same count); bounded like wait.
  std::vector<double> all_gather(std::span<const double> mine, std::string_view what);
  void barrier(std::string_view what);
  // The MPI communicator of `group` (a pointer to its MPI_Comm; MPI_COMM_WORLD's for the whole
  // world), split from the world on first use: every rank must ask for the same groups in the same
  // order, as every rank runs the same records. nullptr without MPI.
  const void* communicator(const RankGroup& group);

  bool broken() const { return broken_; }
  ~Ranks();  // MPI_Finalize (under a watchdog) unless a wait failed

 private:
  Ranks();
  [[noreturn]] void timed_out(std::string message);
  RankInfo info_;
  bool mpi_ = false, broken_ = false;
  double timeout_ = kDefaultTimeoutSeconds;
  int joins_ = 0;
  std::map<std::pair<int, int>, std::shared_ptr<void>> groups_;  // (size, stride) -> MPI_Comm
};

// The collectives the ranks run on host buffers (MPI; NCCL has its own in workloads/nccl).
enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, SendRecv };
enum class WireType { F32, BF16 };  // BF16: 16-bit words; reductions widen to FP32, round to nearest even
std::string_view collective_name(Collective c);
// The collective named so (collective_name's inverse); nullopt for any other name.
std::optional<Collective> collective_from_name(std::string_view name);
// nccl-tests' bus-bandwidth factor for n ranks (DESIGN.md): all_reduce 2(n-1)/n; all_gather,
// reduce_scatter, all_to_all (n-1)/n; broadcast and send_recv 1.
double bus_factor(Collective c, int n);

// One collective on this rank's buffers (over `group`, default the world), bounded like Ranks::wait. `count`:
// elements of the full buffer S (nccl-tests' convention: all_gather's output, reduce_scatter's input), a
// multiple of the rank count for the sharded ones. in: S elements (all_gather sends its own shard of it, rank
// r's slice r); out: S elements (reduce_scatter: S/n). send_recv: to the previous ring neighbour, from the
// next (rank 0 gets rank 1's buffer); broadcast: rank 0's `in` into every `out`.
void run_collective(Ranks& ranks, Collective c, WireType t, const void* in, void* out, std::size_t count,
                    std::string_view what, const RankGroup* group = nullptr);

// Times `call` (one collective) the same number of times on every rank, each call after a
// barrier: rank 0's first call picks the count within the policy and broadcasts it. Returns the
// slowest rank's summary (the time is the max over ranks of each rank's median) and its rank.
struct RanksTiming {
  Summary summary;
  int slowest_rank = 0;
};
RanksTiming time_across_ranks(Ranks& ranks, const RepeatPolicy& policy, const std::function<void()>& call,
                              std::string_view what);

std::uint16_t to_bf16(float f);  // round to nearest even
float from_bf16(std::uint16_t h);

// "16 MiB", "8 B": sizes in the timeout lines and the probe's labels.
std::string bytes_label(double bytes);

}  // namespace rafter
