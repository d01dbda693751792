// Datasheet tables and level naming for NVIDIA GPUs (see gpu_model.hpp).
#include "gpu_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace rafter::probes::cuda {
namespace {

// Dense FLOP (or OP) per clock per SM, from NVIDIA's architecture whitepapers (A100: GA100
// whitepaper table 3; H100/H200: GH100 whitepaper table 2). One FMA counts 2.
const std::map<std::string_view, double>* rates_for(int major, int minor) {
  static const std::map<std::string_view, double> sm80 = {
      {"fp64", 64}, {"fp64_tensor", 128}, {"fp32", 128}, {"tf32", 1024},
      {"fp16", 2048}, {"bf16", 2048}, {"int8", 4096}};
  static const std::map<std::string_view, double> sm90 = {
      {"fp64", 128}, {"fp64_tensor", 256}, {"fp32", 256}, {"tf32", 2048}, {"fp16", 4096},
      {"bf16", 4096}, {"fp8", 8192}, {"int8", 8192}};
  if (major == 8 && minor == 0) return &sm80;
  if (major == 9 && minor == 0) return &sm90;
  return nullptr;
}

std::string ghz(double hz) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f GHz", hz / 1e9);
  return b;
}

}  // namespace

std::optional<double> per_sm_per_clock(int cc_major, int cc_minor, std::string_view key) {
  const auto* rates = rates_for(cc_major, cc_minor);
  if (!rates) return std::nullopt;
  auto it = rates->find(key);
  if (it == rates->end()) return std::nullopt;
  return it->second;
}

std::optional<Datasheet> compute_datasheet(int cc_major, int cc_minor, std::string_view key, int sms,
                                           double sm_clock_hz) {
  auto rate = per_sm_per_clock(cc_major, cc_minor, key);
  if (!rate || sms <= 0 || sm_clock_hz <= 0) return std::nullopt;
  Datasheet d;
  d.value = *rate * sms * sm_clock_hz;
  d.basis = std::to_string(sms) + " SMs x " + std::to_string(int(*rate)) + " " +
            std::string(key) + " dense FLOP/clk/SM (sm_" + std::to_string(cc_major) +
            std::to_string(cc_minor) + " whitepaper) x " + ghz(sm_clock_hz) +
            " (SM clock measured during the probe)";
  return d;
}

Datasheet shared_memory_datasheet(int sms, double sm_clock_hz) {
  Datasheet d;
  d.value = 128.0 * sms * sm_clock_hz;
  d.basis = std::to_string(sms) + " SMs x 128 B/clk/SM (32 banks x 4 B) x " + ghz(sm_clock_hz) +
            " (SM clock measured during the probe)";
  return d;
}

std::optional<Datasheet> device_memory_datasheet(double memory_clock_hz, int bus_width_bits) {
  if (memory_clock_hz <= 0 || bus_width_bits <= 0) return std::nullopt;
  Datasheet d;
  d.value = 2.0 * memory_clock_hz * bus_width_bits / 8.0;
  d.basis = "2 transfers/clk x " + ghz(memory_clock_hz) + " memory clock x " +
            std::to_string(bus_width_bits) + "-bit bus";
  return d;
}

std::optional<Datasheet> pcie_datasheet(int generation, int lanes) {
  static const double gt_per_s[] = {0, 2.5, 5, 8, 16, 32, 64};
  if (generation < 1 || generation > 6 || lanes <= 0) return std::nullopt;
  // Gen 1-2 encode 8b/10b, gen 3-5 128b/130b; gen 6 (FLIT, 242/256) is taken as 242/256.
  double efficiency = generation <= 2 ? 0.8 : generation <= 5 ? 128.0 / 130.0 : 242.0 / 256.0;
  Datasheet d;
  d.value = gt_per_s[generation] * 1e9 * lanes * efficiency / 8.0;
  d.basis = "PCIe gen " + std::to_string(generation) + " x" + std::to_string(lanes) + ": " +
            std::to_string(int(gt_per_s[generation])) + " GT/s per lane, one direction, encoding overhead removed";
  return d;
}

std::optional<Datasheet> nvlink_datasheet(int cc_major, int links) {
  const double per_link = cc_major >= 7 && cc_major <= 9 ? 25e9 : cc_major == 10 ? 50e9 : 0;
  if (per_link == 0 || links <= 0) return std::nullopt;
  Datasheet d;
  d.value = per_link * links;
  d.basis = fmt::format("NVLink of compute capability {}.x: {} link(s) x {:.0f} GB/s each way", cc_major,
                        links, per_link / 1e9);
  return d;
}

PeerLinkName name_peer_link(const nlohmann::json& facts) {
  PeerLinkName n;
  if (facts.value("nvml", "") != "available") return n;
  n.via = facts.value("common_ancestor", "");
  if (!facts.value("nvlink_p2p", false)) {
    n.kind = "pcie";
    return n;
  }
  n.kind = "nvlink";
  n.via = "direct";
  int direct = 0, switched = 0;
  for (const auto& l : facts.value("nvlinks", nlohmann::json::array())) {
    if (l.value("to_peer", false))
      ++direct;
    else if (l.value("remote", "") == "switch")
      ++switched;
    if (n.version.empty()) n.version = l.value("version", "");
  }
  if (direct == 0 && switched > 0) n.via = "nvswitch";
  n.links = direct > 0 ? direct : switched;
  return n;
}

void attach_datasheet(Ceiling& c, const std::optional<Datasheet>& d) {
  if (d) {
    c.datasheet_value = d->value;
    c.datasheet_basis = d->basis;
  }
  apply_flags(c);
}

double unified_l1_bytes_per_sm(int cc_major, int cc_minor) {
  if (cc_major == 9 && cc_minor == 0) return 256.0 * 1024;
  if (cc_major == 8 && cc_minor == 0) return 192.0 * 1024;
  if (cc_major == 8 || cc_major == 7) return 128.0 * 1024;
  return 0;
}

std::vector<MemoryLevel> gpu_memory_levels(const GpuMemorySizes& s) {
  std::vector<MemoryLevel> levels;
  levels.push_back({"shared", s.shared_per_sm_bytes, 0, 1, s.sms});
  // With no shared memory carved out, global loads may use the whole unified SRAM as L1.
  double l1 = unified_l1_bytes_per_sm(s.cc_major, s.cc_minor);
  if (l1 > 0) levels.push_back({"L1", l1, 128, 1, s.sms});
  levels.push_back({"L2", s.l2_bytes, 128, s.sms, 1});
  levels.push_back({s.bus_width_bits >= 1024 ? "HBM" : "DRAM", s.device_memory_bytes, 0, s.sms, 1});
  return levels;
}

std::optional<Window> plateau_window(const std::vector<MemoryLevel>& levels, std::string_view level) {
  std::vector<const MemoryLevel*> cached;
  for (const auto& l : levels)
    if (l.name != "shared") cached.push_back(&l);
  for (std::size_t i = 0; i < cached.size(); ++i) {
    if (cached[i]->name != level) continue;
    Window w;
    w.low_bytes = i == 0 ? 0 : 2 * cached[i - 1]->size_bytes;
    bool outermost = i + 1 == cached.size();
    w.high_bytes = outermost ? 1e30 : cached[i]->size_bytes / 2;
    if (w.high_bytes < w.low_bytes) return std::nullopt;
    return w;
  }
  return std::nullopt;
}

std::vector<std::size_t> operator_sized_streams(std::size_t first, std::size_t held, int count) {
  std::vector<std::size_t> sizes;
  for (std::size_t n = first; n > 0 && n <= held && int(sizes.size()) < count; n *= 2) sizes.push_back(n);
  return sizes;
}

std::optional<Plateau> find_plateau(const std::vector<SweepPoint>& points, const Window& w) {
  std::vector<SweepPoint> in;
  for (const auto& p : points)
    if (p.working_set_bytes >= w.low_bytes && p.working_set_bytes <= w.high_bytes) in.push_back(p);
  if (in.empty()) return std::nullopt;
  std::sort(in.begin(), in.end(),
            [](const SweepPoint& a, const SweepPoint& b) { return a.figure.value < b.figure.value; });
  Plateau p;
  p.point = in[in.size() / 2];
  p.points = int(in.size());
  p.spread = p.point.figure.value > 0
                 ? (in.back().figure.value - in.front().figure.value) / p.point.figure.value
                 : 0;
  return p;
}

namespace {
// Value at quantile q of sorted values in [lo, hi).
double quantile(const std::vector<double>& v, std::size_t lo, std::size_t hi, double q) {
  return v[lo + std::min(hi - lo - 1, static_cast<std::size_t>(q * double(hi - lo)))];
}
}  // namespace

std::optional<LatencySplit> split_latencies(std::vector<double> cycles, double min_share, double min_ratio) {
  const std::size_t n = cycles.size();
  if (n < 4) return std::nullopt;
  std::sort(cycles.begin(), cycles.end());
  // Prefix sums give each cut's within-group sum of squares in O(1).
  std::vector<double> sum(n + 1, 0.0), sq(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    sum[i + 1] = sum[i] + cycles[i];
    sq[i + 1] = sq[i] + cycles[i] * cycles[i];
  }
  auto within = [&](std::size_t lo, std::size_t hi) {
    const double s = sum[hi] - sum[lo];
    return (sq[hi] - sq[lo]) - s * s / double(hi - lo);
  };
  std::size_t cut = 0;
  double best = 0;
  for (std::size_t k = 1; k < n; ++k) {
    const double w = within(0, k) + within(k, n);
    if (cut == 0 || w < best) {
      best = w;
      cut = k;
    }
  }
  LatencySplit s;
  s.fast_lines = cut;
  s.slow_lines = n - cut;
  s.fast_share = double(cut) / double(n);
  s.fast_median = quantile(cycles, 0, cut, 0.5);
  s.slow_median = quantile(cycles, cut, n, 0.5);
  s.fast_p10 = quantile(cycles, 0, cut, 0.1);
  s.fast_p90 = quantile(cycles, 0, cut, 0.9);
  s.slow_p10 = quantile(cycles, cut, n, 0.1);
  s.slow_p90 = quantile(cycles, cut, n, 0.9);
  if (s.fast_share < min_share || 1 - s.fast_share < min_share) return std::nullopt;
  if (s.slow_median < min_ratio * s.fast_median || s.fast_p90 >= s.slow_p10) return std::nullopt;
  return s;
}

std::vector<LatencyStep> latency_steps(const std::vector<std::pair<double, double>>& sweep, double rise) {
  std::vector<LatencyStep> steps;
  if (sweep.empty()) return steps;
  double base = sweep.front().second;
  for (std::size_t i = 1; i < sweep.size(); ++i) {
    const double c = sweep[i].second;
    const bool held = i + 1 == sweep.size() || sweep[i + 1].second > rise * base;
    if (c > rise * base && held) {
      steps.push_back({sweep[i].first, base, c});
      base = c;
    }
  }
  return steps;
}

}  // namespace rafter::probes::cuda
