// NcclGroup: communicator setup for both launches, the collectives as NCCL calls in one group, and
// the bounded wait (see nccl_group.hpp).
#include "rafter/collector/nccl_group.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "rafter/collector/nccl_choice.hpp"

namespace rafter {
namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess && r != ncclInProgress) throw InputError(fmt::format("{}: {}", what, ncclGetErrorString(r)));
}
void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw InputError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

}  // namespace

struct NcclGroup::Impl {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
};

NcclGroup::NcclGroup(int ranks, int device, int stride) : impl_(std::make_unique<Impl>()), size_(ranks) {
  nccl_choices_enable();  // before NCCL loads its profiler plugin, at the first communicator
  Ranks& world = Ranks::world();
  if (world.size() > 1) {  // one process per GPU
    group_ = rank_group(world.rank(), world.size(), ranks, stride);
    // One unique id per group, all made by rank 0 and sent to every rank in one broadcast.
    std::vector<ncclUniqueId> ids(std::size_t(world.size() / ranks));
    if (world.rank() == 0)
      for (ncclUniqueId& id : ids) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    world.broadcast(ids.data(), ids.size() * sizeof(ncclUniqueId), 0, "the NCCL unique ids");
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (device >= count)
      throw InputError(
          fmt::format("rank {} would drive cuda:{}, but its node has {} GPU(s): one GPU per rank",
                      world.rank(), device, count));
    members_.push_back({group_.rank, device, nullptr, nullptr});
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    impl_->comms.resize(1);
    check_nccl(ncclCommInitRank(&impl_->comms[0], ranks, ids[std::size_t(group_.color)], group_.rank),
               "ncclCommInitRank");
    mpi_ = true;
  } else {
    if (stride != 1)
      throw InputError(fmt::format(
          "ranks={} stride={}: groups of ranks apart need one process per GPU (mpirun)", ranks, stride));
    group_.size = ranks;  // rank 0, stride 1: the members are the group
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (device + ranks > count)
      throw InputError(fmt::format("ranks={} needs {} GPUs from cuda:{}; this machine has {}", ranks, ranks,
                                   device, count));
    std::vector<int> devs;
    for (int i = 0; i < ranks; ++i)
      devs.push_back(device + i), members_.push_back({i, device + i, nullptr, nullptr});
    impl_->comms.resize(devs.size());
    check_nccl(ncclCommInitAll(impl_->comms.data(), ranks, devs.data()), "ncclCommInitAll");
  }
  for (const Member& m : members_) {
    check_cuda(cudaSetDevice(m.device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&impl_->streams.emplace_back(), cudaStreamNonBlocking), "cudaStreamCreate");
  }
}

NcclGroup::~NcclGroup() {
  for (std::size_t i = 0; i < members_.size(); ++i) {
    cudaSetDevice(members_[i].device);
    if (i < impl_->streams.size()) cudaStreamDestroy(impl_->streams[i]);
    if (impl_->comms[i]) ncclCommDestroy(impl_->comms[i]);
  }
}

int NcclGroup::version() {
  int v = 0;
  ncclGetVersion(&v);
  return v;
}

void NcclGroup::run(Collective c, WireType wt, std::size_t S, std::string_view what,
                    const std::function<void()>& after_issue) {
  const ncclDataType_t t = wt == WireType::BF16 ? ncclBfloat16 : ncclFloat32;
  const std::size_t n = std::size_t(size_), shard = S / n, elem = wt == WireType::BF16 ? 2 : 4;
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const Member& m = members_[i];
    ncclComm_t comm = impl_->comms[i];
    cudaStream_t s = impl_->streams[i];
    check_cuda(cudaSetDevice(m.device), "cudaSetDevice");
    const char* in = static_cast<const char*>(m.in);
    char* out = static_cast<char*>(m.out);
    const int r = m.rank, nr = size_;
    switch (c) {
      case Collective::AllReduce: check_nccl(ncclAllReduce(in, out, S, t, ncclSum, comm, s), "ncclAllReduce"); break;
      case Collective::ReduceScatter: check_nccl(ncclReduceScatter(in, out, shard, t, ncclSum, comm, s), "ncclReduceScatter"); break;
      case Collective::AllGather: check_nccl(ncclAllGather(in + std::size_t(r) * shard * elem, out, shard, t, comm, s), "ncclAllGather"); break;
      case Collective::Broadcast: check_nccl(ncclBroadcast(in, out, S, t, 0, comm, s), "ncclBroadcast"); break;
      case Collective::SendRecv:  // ring: to the previous neighbour, from the next (rank 0 gets rank 1's)
        check_nccl(ncclSend(in, S, t, (r + nr - 1) % nr, comm, s), "ncclSend");
        check_nccl(ncclRecv(out, S, t, (r + 1) % nr, comm, s), "ncclRecv");
        break;
      case Collective::AllToAll:  // chunk p to rank p; rank p's chunk r lands in slot p
        for (int p = 0; p < nr; ++p) {
          check_nccl(ncclSend(in + std::size_t(p) * shard * elem, shard, t, p, comm, s), "ncclSend");
          check_nccl(ncclRecv(out + std::size_t(p) * shard * elem, shard, t, p, comm, s), "ncclRecv");
        }
        break;
    }
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  if (after_issue) after_issue();
  try {
    Ranks::world().wait(what, [&] {
      for (std::size_t i = 0; i < members_.size(); ++i) {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(impl_->comms[i], &async);
        check_nccl(async, "NCCL");
        const cudaError_t q = cudaStreamQuery(impl_->streams[i]);
        if (q == cudaErrorNotReady) return false;
        check_cuda(q, "cudaStreamQuery");
      }
      return true;
    });
  } catch (const CommTimeout&) {
    for (ncclComm_t& comm : impl_->comms) ncclCommAbort(comm), comm = nullptr;  // NCCL's kernels would spin forever
    throw;
  }
}

}  // namespace rafter
