// The collectives' sweep and its ceilings (see comm_sweep.hpp).
#include "comm_sweep.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace rafter::probes::comm {
namespace {

struct Point {
  double bytes, seconds, algbw, busbw;
  Summary time;  // the slowest rank's
  nlohmann::json choice;  // SweepSpec::choice's answer, or null
};

void add_ceilings(const SweepSpec& spec, Collective c, WireType t, const std::vector<Point>& pts, MachineProfile& profile) {
  nlohmann::json sweep = nlohmann::json::array();
  for (const Point& p : pts) {
    sweep.push_back({{"bytes", p.bytes}, {"time_s", p.seconds}, {"algbw_Bps", p.algbw}, {"busbw_Bps", p.busbw}});
    if (!p.choice.is_null()) sweep.back()["choice"] = p.choice;
  }
  const double factor = bus_factor(c, spec.ranks);
  Ceiling link;
  link.kind = CeilingKind::Link;
  link.device = spec.device;
  link.resource = fmt::format("{}:{}", spec.link, spec.ranks);  // per rank count: the link's name and its n
  link.operation = std::string(collective_name(c));
  link.isa = t == WireType::BF16 ? "bf16" : "fp32";
  link.scope = "device";
  link.threads = spec.ranks;
  link.probe = spec.probe;
  const double moved = pts.back().bytes * factor;
  link.figure = Figure::measured(transform(pts.back().time, [moved](double s) { return moved / s; }), "B/s");
  link.params = spec.params;
  link.params.update({{"ranks", spec.ranks}, {"bus_factor", factor}, {"sizes", sweep}, {"bytes", pts.back().bytes},
                      {"algbw_Bps", pts.back().algbw},
                      {"time", "max over ranks of each rank's median, each call after a barrier"}});
  if (!pts.back().choice.is_null()) link.params["choice"] = pts.back().choice;
  Ceiling lat = link;
  lat.kind = CeilingKind::Latency;
  lat.figure = Figure::measured(pts.front().time, "s");
  lat.params = spec.params;
  lat.params.update({{"ranks", spec.ranks}, {"bytes", pts.front().bytes}});
  if (!pts.front().choice.is_null()) lat.params["choice"] = pts.front().choice;
  if (factor > 0) profile.ceilings.push_back(std::move(link));  // one rank: no bus traffic, no link ceiling
  profile.ceilings.push_back(std::move(lat));
}

}  // namespace

std::vector<int> rank_counts(int gpus) {
  std::vector<int> out;
  for (int n = 2; n < gpus; n *= 2) out.push_back(n);
  out.push_back(std::max(gpus, 1));
  return out;
}

std::vector<double> sweep_sizes(const ProbeOptions& o, double max_bytes) {
  std::vector<double> out;
  if (o.quick) {
    for (const double b : {8.0, 4096.0, double(1 << 20)})
      if (b <= max_bytes) out.push_back(b);
    return out;
  }
  for (double b = 8; b <= max_bytes; b *= 8) out.push_back(b);
  return out;
}

void sweep_collectives(const ProbeOptions& options, const SweepSpec& spec, const MakeCall& make, MachineProfile& profile) {
  Ranks& ranks = Ranks::world();
  for (const WireType t : {WireType::F32, WireType::BF16})
    for (const Collective c : spec.collectives) {
      std::vector<Point> pts;
      for (const double bytes : sweep_sizes(options, spec.max_bytes)) {
        const std::size_t elem = t == WireType::BF16 ? 2 : 4, n = std::size_t(spec.ranks);
        std::size_t count = std::max(std::size_t(bytes) / elem, n);
        count -= count % n;  // the sharded collectives split S evenly
        const double S = double(count * elem);
        const std::string what = fmt::format("{} ({})", collective_name(c), bytes_label(S));
        ranks.join(what);
        const std::function<void()> call = make(c, t, count, what);
        if (spec.choice) spec.choice();  // drops what came before this size
        const RanksTiming tm = time_across_ranks(ranks, options.policy, call, what);
        const double s = tm.summary.median;
        pts.push_back({S, s, S / s, S / s * bus_factor(c, spec.ranks), tm.summary,
                       spec.choice ? spec.choice() : nlohmann::json()});
      }
      add_ceilings(spec, c, t, pts, profile);
    }
}

}  // namespace rafter::probes::comm
