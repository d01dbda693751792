// comm.mpi: the collectives between CPU ranks under mpirun (all_reduce, all_gather, reduce_scatter,
// all_to_all, broadcast, send_recv between ring neighbours) over message sizes from 8 B, in FP32
// and BF16 (BF16 reductions: 16-bit words summed by a user op in FP32, rounded to nearest even).
// Per collective, type and rank count: a link ceiling (bus bandwidth at the largest size, with the
// sweep's time, algorithm and bus bandwidth per size in params) and a latency ceiling (the time at
// 8 B). Time = the slowest rank's median (collector's time_across_ranks). Run alone it measures
// nothing: there is no second rank.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "rafter/collector/ranks.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::probes {
namespace {

constexpr Collective kCollectives[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                       Collective::AllToAll, Collective::Broadcast, Collective::SendRecv};

// Message sizes (bytes of the full buffer S): 8 B, then x8 up to the cap; --quick: three sizes.
std::vector<double> sizes(const ProbeOptions& o) {
  if (o.quick) return {8, 4096, 1 << 20};
  const double cap = o.max_working_set_bytes > 0 ? std::min(o.max_working_set_bytes / 2, 128.0 * (1 << 20))
                                                 : 128.0 * (1 << 20);  // in + out buffers per rank
  std::vector<double> out;
  for (double b = 8; b <= cap; b *= 8) out.push_back(b);
  return out;
}

struct Point {
  double bytes, seconds, algbw, busbw;
  Summary time;  // the slowest rank's
};

Point measure(Ranks& ranks, Collective c, WireType t, double bytes, const RepeatPolicy& policy) {
  const int n = ranks.size();
  const std::size_t elem = t == WireType::BF16 ? 2 : 4;
  std::size_t count = std::max<std::size_t>(std::size_t(bytes) / elem, std::size_t(n));
  count -= count % std::size_t(n);  // the sharded collectives split S evenly
  std::vector<std::uint8_t> in(count * elem, 0x3c), out(count * elem);  // 0x3c3c: a finite bf16 and float
  const double S = double(count * elem);
  const std::string what = fmt::format("{} ({})", collective_name(c), bytes_label(S));
  ranks.join(what);
  const RanksTiming tm = time_across_ranks(ranks, policy, [&] { run_collective(ranks, c, t, in.data(), out.data(), count, what); }, what);
  const double s = tm.summary.median;
  return {S, s, S / s, S / s * bus_factor(c, n), tm.summary};
}

void add_ceilings(Ranks& ranks, Collective c, WireType t, const std::vector<Point>& pts, MachineProfile& profile) {
  const std::string type = t == WireType::BF16 ? "bf16" : "fp32";
  nlohmann::json sweep = nlohmann::json::array();
  for (const Point& p : pts)
    sweep.push_back({{"bytes", p.bytes}, {"time_s", p.seconds}, {"algbw_Bps", p.algbw}, {"busbw_Bps", p.busbw}});
  const nlohmann::json params = {{"ranks", ranks.size()}, {"launcher", ranks.info().launcher},
                                 {"bus_factor", bus_factor(c, ranks.size())}, {"sizes", sweep},
                                 {"time", "max over ranks of each rank's median, each call after a barrier"}};
  Ceiling link;
  link.kind = CeilingKind::Link;
  link.device = "cpu";
  link.resource = fmt::format("mpi:{}", ranks.size());  // per rank count: the link's name and its n
  link.operation = std::string(collective_name(c));
  link.isa = type;
  link.scope = "device";
  link.threads = ranks.size();
  link.probe = "comm.mpi";
  const double moved = pts.back().bytes * bus_factor(c, ranks.size());
  link.figure = Figure::measured(transform(pts.back().time, [moved](double t) { return moved / t; }), "B/s");
  link.params = params;
  link.params["bytes"] = pts.back().bytes;
  link.params["algbw_Bps"] = pts.back().algbw;
  Ceiling lat = link;
  lat.kind = CeilingKind::Latency;
  lat.figure = Figure::measured(pts.front().time, "s");
  lat.params = {{"ranks", ranks.size()}, {"bytes", pts.front().bytes}};
  profile.ceilings.push_back(std::move(link));
  profile.ceilings.push_back(std::move(lat));
}

void run_mpi_collectives(const ProbeOptions& options, const Device&, MachineProfile& profile) {
  Ranks& ranks = Ranks::world();
  if (!ranks.mpi() || ranks.size() < 2) {
    profile.conditions["comm.mpi"] = "not measured: one rank (launch under mpirun -np N, N >= 2)";
    return;
  }
  for (const WireType t : {WireType::F32, WireType::BF16})
    for (const Collective c : kCollectives) {
      std::vector<Point> pts;
      for (const double b : sizes(options)) pts.push_back(measure(ranks, c, t, b, options.policy));
      add_ceilings(ranks, c, t, pts, profile);
    }
}

}  // namespace

RAFTER_REGISTER_PROBE("comm.mpi", "cpu", "MPI collectives between CPU ranks (under mpirun): busbw, latency",
                      run_mpi_collectives);

}  // namespace rafter::probes
