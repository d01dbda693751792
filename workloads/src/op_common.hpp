// Shared pieces of the catalogue: a base class holding an operator's static description, the
// analytic traffic models (streaming, blocked GEMM, flash attention), and random problem data.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rafter/workloads/operator.hpp"
#include "rafter/workloads/precision.hpp"

namespace rafter::workloads::detail {

class CatalogueOp : public OperatorDef {
 public:
  CatalogueOp(std::string name, std::string summary, std::vector<ParamSpec> params,
              std::vector<std::string> precisions, std::vector<std::string> phases = {"fwd"})
      : name_(std::move(name)), summary_(std::move(summary)), params_(std::move(params)),
        precisions_(std::move(precisions)), phases_(std::move(phases)) {}
  std::string name() const override { return name_; }
  std::string summary() const override { return summary_; }
  std::vector<ParamSpec> params() const override { return params_; }
  std::vector<std::string> precisions() const override { return precisions_; }
  std::vector<std::string> phases() const override { return phases_; }

 private:
  std::string name_, summary_;
  std::vector<ParamSpec> params_;
  std::vector<std::string> precisions_, phases_;
};

// Shape parameter as a double (FLOP and byte formulas are evaluated in double: no overflow).
double dimension(const OpInstance& inst, std::string_view key);
// Storage bytes per element of the instance's precision.
double element_bytes(const OpInstance& inst);
// Precisions the memory-bound operators declare (storage of activations).
std::vector<std::string> activation_precisions();

// Name of the outermost level: "HBM" when the device has it, else "DRAM".
std::string outer_level_name(const std::vector<MemoryLevel>& levels);

// The traffic at each memory level. `model(inner_capacity_bytes)` gives the bytes that cross the
// boundary between that level and the one closer to the core; inner capacity 0 means the level
// is the innermost one (its traffic is what the core's loads and stores issue). The usable
// capacity of a cache for blocking is half its size: the rest holds other data and suffers
// conflict misses. With no levels known, a single DRAM level is reported.
std::vector<LevelBytes> level_traffic(const std::vector<MemoryLevel>& levels,
                                      const std::function<double(double inner_capacity_bytes)>& model);

// Streaming operators: every level beyond the innermost moves the compulsory bytes; the innermost
// also sees `extra_inner_bytes` (re-reads of a row that is still in L1).
std::vector<LevelBytes> streaming_traffic(const std::vector<MemoryLevel>& levels, double compulsory_bytes,
                                          double extra_inner_bytes = 0);

// Blocked GEMM C[m,n] (+)= A[m,k] B[k,n], `batch` times; see docs/operators.md for the model.
struct GemmTrafficInput {
  double m = 0, n = 0, k = 0, batch = 1;
  double a_bytes = 2, b_bytes = 2, c_bytes = 2;  // per element
  bool c_read = false;                             // accumulate into C
  // Innermost accumulator tile: A is re-read once per tile_n columns of C, B once per tile_m rows.
  // 16 x 16 registers on CPUs; with_device_tile() sets the GPU's tensor-core tile.
  double tile_m = 16, tile_n = 16;
  // Smallest C block an outer level sees (0: none). On GPUs the fp32 accumulators of a 2-CTA
  // cluster (128 x 256 per SM, operands multicast by TMA) stay in registers: 256 x 256.
  double min_block_m = 0, min_block_n = 0;
};
// A GPU's levels: the innermost is "shared" (a CPU's is L1). The traffic models that count a
// tensor-core tile or a GQA group through shared memory ask this.
bool innermost_is_shared(const std::vector<MemoryLevel>& levels);
// On a GPU (innermost level "shared") the operands of the tensor cores come from shared memory
// per warpgroup MMA of 64 x 256 accumulators (Hopper wgmma m64n256), and the outer levels see at
// least a 256 x 256 block of C per cluster; elsewhere the CPU tile is kept.
GemmTrafficInput with_device_tile(GemmTrafficInput g, const std::vector<MemoryLevel>& levels);
double gemm_compulsory_bytes(const GemmTrafficInput& g);
double gemm_written_bytes(const GemmTrafficInput& g);  // C, once
double gemm_traffic_bytes(const GemmTrafficInput& g, double inner_capacity_bytes);
std::vector<LevelBytes> gemm_traffic(const std::vector<MemoryLevel>& levels, const GemmTrafficInput& g);

// Random problem data: uniform in [lo, hi), never all zeros.
HostTensor random_tensor(std::string name, std::vector<std::int64_t> dims, std::mt19937_64& rng,
                         double lo = -1.0, double hi = 1.0);
HostTensor empty_tensor(std::string name, std::vector<std::int64_t> dims);
std::size_t element_count(const std::vector<std::int64_t>& dims);
// Reduces a dimension for the FP64 check: min(value, cap), at least `floor_value`.
std::int64_t check_dim(std::int64_t value, std::int64_t cap);
// Grouped-query attention: heads a multiple of kv_heads (InputError naming the operator otherwise).
void check_head_groups(const OpInstance& inst);
// Check shapes of grouped-query attention: at most 2 KV heads, each with at most max_group query
// heads (the group size of the full shape kept where it is smaller).
void check_gqa_heads(OpInstance& small, const OpInstance& full, std::int64_t max_group);

}  // namespace rafter::workloads::detail
