// An NCCL communicator over this process's GPUs, shared by the NCCL backend (workloads/nccl) and
// probe (probes/comm): one member per GPU this process drives. Under mpirun, one process per GPU
// (rank r on the GPU it was given, local_rank places after the first; NCCL's unique id from rank 0
// through Ranks::broadcast); alone, one process over `ranks` local GPUs (ncclCommInitAll; group
// calls). Every run is polled to the deadline (Ranks::wait on cudaStreamQuery and
// ncclCommGetAsyncError); a timeout aborts the communicators. Built only with CUDA and NCCL
// (RAFTER_HAVE_NCCL in CMake).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "rafter/collector/ranks.hpp"

namespace rafter {

class NcclGroup {
 public:
  struct Member {
    int rank = 0, device = 0;  // rank: the member's place in its group
    void* in = nullptr;   // device buffers the caller owns: S elements in
    void* out = nullptr;  // S out (reduce_scatter: S/n)
  };
  // Under mpirun `device` is this rank's GPU (rank_device in ranks.hpp) and the communicator is this
  // rank's group of `ranks`, its members `stride` ranks apart (rank_group in ranks.hpp: the whole
  // world, a TP group, a TP×DP grid's data-parallel group); alone, the first of the `ranks` GPUs
  // (stride 1). Throws InputError when the mpirun world does not form such groups or `ranks` exceeds
  // the local GPUs.
  NcclGroup(int ranks, int device, int stride = 1);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const { return size_; }
  // Under mpirun this rank's group (rank_group); alone, all `ranks` members as one group.
  const RankGroup& group() const { return group_; }
  bool mpi() const { return mpi_; }  // one process per GPU
  std::vector<Member>& members() { return members_; }
  // One collective on every member's buffers (the same conventions as run_collective; broadcast
  // from rank 0's `in`), then a bounded wait for every member's stream. `after_issue` runs once the
  // collective is issued, before the wait: work the caller puts beside it on its own streams.
  void run(Collective c, WireType t, std::size_t count, std::string_view what,
           const std::function<void()>& after_issue = {});
  static int version();  // ncclGetVersion

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<Member> members_;
  int size_ = 1;
  RankGroup group_;
  bool mpi_ = false;
};

}  // namespace rafter
