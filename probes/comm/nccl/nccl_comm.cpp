// comm.nccl: the collectives between GPUs over NCCL (all_reduce, all_gather, reduce_scatter,
// all_to_all, broadcast, send_recv between ring neighbours), FP32 and BF16, 8 B up to 1 GiB, or
// 8 GiB where every GPU of the sweep has room for it (largest_message; --quick: 8 B, 4 KiB, 1 MiB),
// through the collector's NcclGroup: under mpirun one process per GPU
// (it runs on the device cuda:<local rank>), alone one process over the local GPUs (it runs once,
// on cuda:0). Either way a sweep per communicator size 2, 4, 8 … and all of them (rank_counts; under
// mpirun groups of consecutive ranks, every group at once), so that a TP=2 step on an 8-GPU node
// finds its roof (nccl:2) beside nccl:8. The sweep and its ceilings are comm_sweep's
// (resource nccl:<ranks>); NCCL's version is in params, and per size what NCCL chose (algorithm,
// protocol, channels: nccl_choice.hpp).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "../comm_sweep.hpp"
#include "rafter/collector/nccl_choice.hpp"
#include "rafter/collector/nccl_group.hpp"

namespace rafter::probes {
namespace {

struct DeviceMemory {
  void* ptr = nullptr;
  int device = 0;
  DeviceMemory(int dev, std::size_t bytes) : device(dev) {
    cudaSetDevice(dev);
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) throw InputError(fmt::format("cudaMalloc of {} on cuda:{} failed", bytes_label(double(bytes)), dev));
    cudaMemset(ptr, 0x3c, bytes);  // 0x3c3c: a finite bf16 and float
  }
  ~DeviceMemory() {
    cudaSetDevice(device);
    cudaFree(ptr);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

// The sweep's largest message: 8 GiB where every GPU taking part (every rank's, under mpirun) has
// 20 GiB free for its two buffers, else 1 GiB. A ZeRO step's gradient reduce-scatter moves several
// GiB, and at 1 GiB NCCL has not reached its plateau: 2 H100 ranks' all_gather gave 263 GB/s busbw
// at 1 GiB, the 6.7 GB all_gather of a TP=2 x DP=2 Llama-2 7B step 283.
double largest_message(int n, int first_device, bool mpi) {
  constexpr double big = double(std::size_t(8) << 30), room = double(std::size_t(20) << 30);
  double free_min = 0;
  for (int d = first_device; d < first_device + (mpi ? 1 : n); ++d) {
    std::size_t free = 0, total = 0;
    cudaSetDevice(d);
    const double f = cudaMemGetInfo(&free, &total) == cudaSuccess ? double(free) : 0.0;
    free_min = d == first_device ? f : std::min(free_min, f);
  }
  if (mpi) {  // every rank must sweep the same sizes
    const std::vector<double> all =
        Ranks::world().all_gather(std::span<const double>(&free_min, 1), "comm.nccl free memory");
    free_min = *std::min_element(all.begin(), all.end());
  }
  return free_min >= room ? big : double(1 << 30);
}

// One sweep over communicators of n ranks: the first n local GPUs, or under mpirun this rank's group
// of n consecutive ranks, every group at once.
void sweep_ranks(const ProbeOptions& options, const Device& device, int n, int first_device, bool mpi,
                 MachineProfile& profile) {
  auto group = std::make_shared<NcclGroup>(n, first_device);
  Ranks& ranks = Ranks::world();
  comm::SweepSpec spec;
  spec.probe = "comm.nccl";
  spec.device = device.id;
  spec.link = "nccl";
  spec.ranks = n;
  spec.max_bytes = largest_message(n, first_device, mpi);
  spec.collectives = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                      Collective::AllToAll,  Collective::Broadcast, Collective::SendRecv};
  spec.params = {{"nccl_version", NcclGroup::version()},
                 {"launch", mpi ? "one process per GPU (mpirun)"
                                : fmt::format("one process over cuda:{}..cuda:{} (ncclCommInitAll)",
                                              first_device, first_device + n - 1)}};
  if (mpi && n < ranks.size()) spec.params["groups"] = describe_groups(group->group(), ranks.size());
  spec.choice = [] { return nccl_choices_json(nccl_choices_take()); };
  auto memory = std::make_shared<std::vector<std::unique_ptr<DeviceMemory>>>();
  comm::sweep_collectives(options, spec, [group, memory](Collective c, WireType t, std::size_t elements, const std::string& what) {
    const std::size_t bytes = elements * (t == WireType::BF16 ? 2 : 4);
    memory->clear();
    for (NcclGroup::Member& m : group->members()) {
      m.in = memory->emplace_back(std::make_unique<DeviceMemory>(m.device, bytes))->ptr;
      m.out = memory->emplace_back(std::make_unique<DeviceMemory>(m.device, bytes))->ptr;
    }
    return std::function<void()>([group, c, t, elements, what] { group->run(c, t, elements, what); });
  }, profile);
  memory->clear();
}

void run_nccl_collectives(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  Ranks& ranks = Ranks::world();
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return;
  const bool mpi = ranks.size() > 1;
  if (device.id != fmt::format("cuda:{}", mpi ? ranks.local_rank() : 0)) return;  // one sweep per process
  for (const int n : comm::rank_counts(mpi ? ranks.size() : count))
    sweep_ranks(options, device, n, mpi ? ranks.local_rank() : 0, mpi, profile);
}
}  // namespace

RAFTER_REGISTER_PROBE("comm.nccl", "cuda", "NCCL collectives between GPUs (one process or mpirun): busbw, latency",
                      run_nccl_collectives);

}  // namespace rafter::probes
