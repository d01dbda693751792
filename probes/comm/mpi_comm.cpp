// comm.mpi: the collectives between CPU ranks under mpirun (all_reduce, all_gather, reduce_scatter,
// all_to_all, broadcast, send_recv between ring neighbours), FP32 and BF16 (BF16 reductions: 16-bit
// words summed by a user op in FP32, rounded to nearest even), 8 B up to 128 MiB; the sweep and
// its ceilings are comm_sweep's. One sweep per group size in 2, 4, 8 … below the world's and the
// world's (rank_counts): the smaller sizes over consecutive ranks, every group at once (a TP×DP
// grid's tensor-parallel groups; resource mpi:<n>). Run alone it measures nothing: there is no
// second rank.
#include <fmt/format.h>

#include <cstdint>
#include <memory>

#include "comm_sweep.hpp"

namespace rafter::probes {
namespace {

void run_mpi_collectives(const ProbeOptions& options, const Device&, MachineProfile& profile) {
  Ranks& ranks = Ranks::world();
  if (!ranks.mpi() || ranks.size() < 2) {
    profile.conditions["comm.mpi"] = "not measured: one rank (launch under mpirun -np N, N >= 2)";
    return;
  }
  for (const int n : comm::rank_counts(ranks.size())) {
    const auto group = std::make_shared<RankGroup>(rank_group(ranks.rank(), ranks.size(), n));
    comm::SweepSpec spec;
    spec.probe = "comm.mpi";
    spec.device = "cpu";
    spec.link = "mpi";
    spec.ranks = n;
    spec.max_bytes = options.max_working_set_bytes > 0
                         ? std::min(options.max_working_set_bytes / 2, 128.0 * (1 << 20))
                         : 128.0 * (1 << 20);  // in + out buffers per rank
    spec.collectives = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                        Collective::AllToAll,  Collective::Broadcast, Collective::SendRecv};
    spec.params = {{"launcher", ranks.info().launcher}};
    if (n < ranks.size()) spec.params["groups"] = describe_groups(*group, ranks.size());
    auto buffers = std::make_shared<std::vector<std::uint8_t>>();
    comm::sweep_collectives(
        options, spec,
        [&](Collective c, WireType t, std::size_t count, const std::string& what) {
          const std::size_t bytes = count * (t == WireType::BF16 ? 2 : 4);
          buffers->assign(2 * bytes, 0x3c);  // 0x3c3c: a finite bf16 and float
          return std::function<void()>([&ranks, buffers, group, c, t, count, bytes, what] {
            run_collective(ranks, c, t, buffers->data(), buffers->data() + bytes, count, what, group.get());
          });
        },
        profile);
  }
}

}  // namespace

RAFTER_REGISTER_PROBE("comm.mpi", "cpu", "MPI collectives between CPU ranks (under mpirun): busbw, latency",
                      run_mpi_collectives);

}  // namespace rafter::probes
