// The operator catalogue: an operator is a declaration (name, shape parameters, precisions,
// analytic FLOPs and bytes, an FP64 reference) that registers itself; backends run instances.
// Added by B (backward compatible): OperatorDef::phases(), ParamSpec::flag, shape_value(),
// format_shape(), normalize_instance().
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/run_record.hpp"

namespace rafter::workloads {

using Shape = std::map<std::string, std::int64_t>;

// One operator in one shape and precision, as a model suite or the user asks for it.
struct OpInstance {
  std::string op;         // catalogue name
  std::string label;      // role in the step, e.g. "layer.mlp.up_proj"; empty = op
  std::string phase;      // "fwd", "bwd_input", "bwd_weight", "bwd", "step"
  Shape shape;            // named integer parameters (flags such as causal as 0/1)
  std::string precision;  // see precision.hpp
  double count = 1;       // occurrences in one step
};

struct ParamSpec {
  std::string name;
  std::int64_t default_value = 0;
  std::string help;
  bool flag = false;      // 0/1 switch (causal, rht, ...); other parameters must be positive
  bool optional = false;  // 0 means "none" (a collective's overlap_m/n/k), else positive
};

// Analytic cost of one call.
struct Cost {
  std::map<std::string, double> flops;  // per compute class ("bf16", "fp32", ...)
  double compulsory_bytes = 0;          // each input read once, each output written once
  double compulsory_write_bytes = -1;   // the written part of compulsory_bytes; < 0 unknown
  std::vector<LevelBytes> bytes;        // per memory level, Source::Analytic; "DRAM"/"HBM" always present
  std::string link;                     // collectives: "nvlink", "pcie", "network"; else empty
  double link_bytes = 0;                // bus bytes on that link per rank (DESIGN.md factors)
};

// FP64 host tensors for the correctness check.
struct HostTensor {
  std::string name;
  std::vector<std::int64_t> dims;
  std::vector<double> data;
};

struct Problem {
  std::vector<HostTensor> inputs;   // random, never zeros
  std::vector<HostTensor> outputs;  // the FP64 reference fills these
};

class OperatorDef {
 public:
  virtual ~OperatorDef() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;
  virtual std::vector<ParamSpec> params() const = 0;
  virtual std::vector<std::string> precisions() const = 0;
  // Phases the operator accepts in OpInstance::phase ("fwd" by default; GEMM: fwd, bwd_input,
  // bwd_weight; norms: fwd, bwd; optimizer: step). An empty OpInstance::phase means the first.
  virtual std::vector<std::string> phases() const { return {"fwd"}; }
  // Throws InputError naming the problem (missing or non-positive parameter, unknown precision).
  virtual void validate(const OpInstance& inst) const;
  // `levels` are the target device's memory levels (innermost first) for the traffic model.
  virtual Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const = 0;
  // A shape small enough for the FP64 reference (default: the instance itself).
  virtual OpInstance check_instance(const OpInstance& full) const { return full; }
  virtual Problem make_problem(const OpInstance& inst, std::uint64_t seed) const = 0;
  virtual void reference(const OpInstance& inst, Problem& problem) const = 0;
  virtual bool is_collective() const { return false; }
  // Device memory the instance's tensors occupy: inputs and outputs, a tensor updated in place
  // counted once. Default: its compulsory bytes (right where nothing is updated in place).
  virtual double footprint_bytes(const OpInstance& inst, const Cost& cost) const {
    (void)inst;
    return cost.compulsory_bytes;
  }
  // The shape parameter along which the operator is a stream of independent pieces, its bytes and
  // time proportional to it ("tokens", "params"): an instance too large for the device is timed
  // on a slice of it (memory_plan.hpp). Empty: the operator cannot be sliced.
  virtual std::string slice_axis(const OpInstance& inst) const {
    (void)inst;
    return "";
  }
};

// Self-registration: RAFTER_REGISTER_OPERATOR(GemmOperator);
class OperatorRegistry {
 public:
  static OperatorRegistry& instance();
  bool add(std::unique_ptr<OperatorDef> op);
  const OperatorDef& get(std::string_view name) const;  // InputError "unknown operator 'x'"
  const OperatorDef* find(std::string_view name) const;
  std::vector<const OperatorDef*> all() const;           // sorted by name

 private:
  std::map<std::string, std::unique_ptr<OperatorDef>, std::less<>> ops_;
};

// The largest shape parameter accepted anywhere (2^48): far beyond any real tensor, and small
// enough that products of a few parameters stay exact in double and the cost arithmetic finite.
inline constexpr std::int64_t kMaxShapeValue = std::int64_t(1) << 48;

// Parses `key=value,key=value` (`rafter profile --shape`): keys are identifiers, each at most
// once; values decimal integers in [0, kMaxShapeValue] (0 for flags; whether a parameter may be 0
// is the operator's validate()). Throws InputError naming the offending item.
Shape parse_shape_string(std::string_view text);

// A shape parameter, or `fallback` when absent.
std::int64_t shape_value(const OpInstance& inst, std::string_view key, std::int64_t fallback = 0);
// A collective's `stride`: how many ranks of the mpirun world lie between its group's members
// (absent or 0: 1, consecutive ranks; a TP×DP grid's data-parallel collectives: tp).
int group_stride(const OpInstance& inst);
// "m=4096 n=4096 k=4096" (parameters in name order).
std::string format_shape(const Shape& shape);
// Fills missing parameters with their defaults and an empty phase with the first phase, then
// validates (InputError naming the problem, including an unknown parameter name).
OpInstance normalize_instance(const OperatorDef& op, OpInstance inst);

}  // namespace rafter::workloads

#define RAFTER_OP_CONCAT_(a, b) a##b
#define RAFTER_OP_CONCAT(a, b) RAFTER_OP_CONCAT_(a, b)
#define RAFTER_REGISTER_OPERATOR(Type)                                                   \
  static const bool RAFTER_OP_CONCAT(rafter_op_registered_, __LINE__) [[maybe_unused]] = \
      ::rafter::workloads::OperatorRegistry::instance().add(std::make_unique<Type>())
