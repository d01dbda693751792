// Traffic models and problem helpers shared by the catalogue (see op_common.hpp and
// docs/operators.md for the models' assumptions).
#include "op_common.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "rafter/collector/error.hpp"

namespace rafter::workloads::detail {

double dimension(const OpInstance& inst, std::string_view key) {
  return static_cast<double>(shape_value(inst, key, 0));
}

double element_bytes(const OpInstance& inst) { return precision_info(inst.precision).bytes_per_element; }

std::vector<std::string> activation_precisions() { return {"bf16", "fp32", "fp16"}; }

std::string outer_level_name(const std::vector<MemoryLevel>& levels) {
  for (const auto& l : levels)
    if (l.name == "HBM") return "HBM";
  return "DRAM";
}

std::vector<LevelBytes> level_traffic(const std::vector<MemoryLevel>& levels,
                                      const std::function<double(double)>& model) {
  std::vector<LevelBytes> out;
  if (levels.empty()) {
    out.push_back({"DRAM", model(0), Source::Analytic});
    return out;
  }
  double inner_capacity = 0;
  for (const auto& level : levels) {
    out.push_back({level.name, model(inner_capacity), Source::Analytic});
    inner_capacity = std::max(inner_capacity, 0.5 * level.size_bytes);
  }
  return out;
}

std::vector<LevelBytes> streaming_traffic(const std::vector<MemoryLevel>& levels, double compulsory_bytes,
                                          double extra_inner_bytes) {
  return level_traffic(levels, [&](double inner) {
    return inner == 0 ? compulsory_bytes + extra_inner_bytes : compulsory_bytes;
  });
}

double gemm_compulsory_bytes(const GemmTrafficInput& g) {
  return g.batch * (g.m * g.k * g.a_bytes + g.k * g.n * g.b_bytes + g.m * g.n * g.c_bytes * (g.c_read ? 2 : 1));
}

double gemm_written_bytes(const GemmTrafficInput& g) { return g.batch * g.m * g.n * g.c_bytes; }

bool innermost_is_shared(const std::vector<MemoryLevel>& levels) {
  return !levels.empty() && levels.front().name == "shared";
}

GemmTrafficInput with_device_tile(GemmTrafficInput g, const std::vector<MemoryLevel>& levels) {
  if (innermost_is_shared(levels)) {
    g.tile_m = 64;
    g.tile_n = 256;
    g.min_block_m = 256;
    g.min_block_n = 256;
  }
  return g;
}

// Innermost level: a tile of tile_m x tile_n accumulators; A is loaded once per tile_n columns of C,
// B once per tile_m rows. Outer levels: an (bm x bn) block of C accumulators (4 B each) lives in the
// inner level; A is re-read once per column block, B once per row block. Never below compulsory.
double gemm_traffic_bytes(const GemmTrafficInput& g, double inner_capacity_bytes) {
  const double compulsory = gemm_compulsory_bytes(g);
  double bm = std::min(g.m, g.tile_m), bn = std::min(g.n, g.tile_n);
  if (inner_capacity_bytes > 0) {
    const double working_set = compulsory / g.batch;
    if (working_set <= inner_capacity_bytes) return compulsory;
    bm = std::min(g.m, std::max(1.0, std::floor(std::sqrt(inner_capacity_bytes / 4.0))));
    bn = std::min(g.n, std::max(1.0, std::floor(inner_capacity_bytes / 4.0 / bm)));
    bm = std::max(bm, std::min(g.m, g.min_block_m));
    bn = std::max(bn, std::min(g.n, g.min_block_n));
  }
  const double a = g.m * g.k * g.a_bytes * std::ceil(g.n / bn);
  const double b = g.k * g.n * g.b_bytes * std::ceil(g.m / bm);
  const double c = g.m * g.n * g.c_bytes * (g.c_read ? 2 : 1);
  return std::max(compulsory, g.batch * (a + b + c));
}

std::vector<LevelBytes> gemm_traffic(const std::vector<MemoryLevel>& levels, const GemmTrafficInput& g) {
  const GemmTrafficInput tiled = with_device_tile(g, levels);
  return level_traffic(levels, [&](double inner) { return gemm_traffic_bytes(tiled, inner); });
}

std::size_t element_count(const std::vector<std::int64_t>& dims) {
  std::size_t n = 1;
  for (auto d : dims) n *= static_cast<std::size_t>(d);
  return n;
}

HostTensor random_tensor(std::string name, std::vector<std::int64_t> dims, std::mt19937_64& rng, double lo,
                         double hi) {
  HostTensor t{std::move(name), std::move(dims), {}};
  std::uniform_real_distribution<double> u(lo, hi);
  t.data.resize(element_count(t.dims));
  for (auto& x : t.data) x = u(rng);
  return t;
}

HostTensor empty_tensor(std::string name, std::vector<std::int64_t> dims) {
  HostTensor t{std::move(name), std::move(dims), {}};
  t.data.assign(element_count(t.dims), 0.0);
  return t;
}

std::int64_t check_dim(std::int64_t value, std::int64_t cap) { return std::min(value, cap); }

void check_head_groups(const OpInstance& inst) {
  const auto h = shape_value(inst, "heads"), kvh = shape_value(inst, "kv_heads");
  if (kvh <= 0 || h % kvh != 0)
    throw InputError(fmt::format("{}: heads={} is not a multiple of kv_heads={}", inst.op, h, kvh));
}

void check_gqa_heads(OpInstance& small, const OpInstance& full, std::int64_t max_group) {
  const auto group = full.shape.at("heads") / full.shape.at("kv_heads");
  small.shape["kv_heads"] = std::min<std::int64_t>(full.shape.at("kv_heads"), 2);
  small.shape["heads"] = small.shape["kv_heads"] * std::min<std::int64_t>(group, max_group);
}

}  // namespace rafter::workloads::detail
