// Every operator of the catalogue in fuzzed shapes: byte 0 picks the operator, byte 1 the
// precision, byte 2 the phase; then 9-byte records (parameter index, 8-byte value) set its shape
// parameters. normalize_instance validates; a shape it accepts must cost finite, non-negative
// FLOPs and bytes (cost, planned_record, footprint) on the CPU's and the GPU's memory levels.
#include <cstring>

#include "fuzz_common.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/suite.hpp"

namespace {

using namespace rafter;

void check_cost(const workloads::OperatorDef& op, const workloads::OpInstance& inst, const std::vector<MemoryLevel>& levels) {
  const workloads::Cost cost = op.cost(inst, levels);
  for (const auto& [cls, f] : cost.flops) fuzz::check_quantity(f, "flops " + cls);
  for (const auto& b : cost.bytes) fuzz::check_quantity(b.bytes, "bytes " + b.level);
  fuzz::check_quantity(cost.compulsory_bytes, "compulsory_bytes");
  fuzz::check_quantity(cost.link_bytes, "link_bytes");
  fuzz::check_quantity(op.footprint_bytes(inst, cost), "footprint_bytes");
  const OperatorRecord r = workloads::planned_record(inst, levels);
  fuzz::check_quantity(r.total_flops(), "record flops");
  fuzz::check_quantity(r.outer_bytes(), "record outer bytes");
  op.slice_axis(inst);
  op.check_instance(inst);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto ops = workloads::OperatorRegistry::instance().all();
  static const auto gpu = workloads::device_memory_levels("cuda:0");
  static const auto cpu = workloads::device_memory_levels("cpu");
  if (size < 3 || ops.empty()) return 0;
  const workloads::OperatorDef& op = *ops[data[0] % ops.size()];
  workloads::OpInstance inst;
  const auto precisions = op.precisions();
  const auto phases = op.phases();
  // One past the end of each list: a name the operator does not have (an empty one for the phase).
  inst.precision = data[1] % (precisions.size() + 1) < precisions.size() ? precisions[data[1] % (precisions.size() + 1)] : "int3";
  inst.phase = data[2] % (phases.size() + 1) < phases.size() ? phases[data[2] % (phases.size() + 1)] : "";
  const auto params = op.params();
  for (std::size_t at = 3; at + 9 <= size; at += 9) {
    std::int64_t value = 0;
    std::memcpy(&value, data + at + 1, sizeof value);
    const std::size_t which = data[at] % (params.size() + 1);
    inst.shape[which < params.size() ? params[which].name : "not_a_parameter"] = value;
  }
  fuzz::expect_typed_errors([&] {
    const workloads::OpInstance valid = workloads::normalize_instance(op, inst);
    fuzz::bug_context() = "costing " + valid.op + " " + valid.phase + " " + valid.precision + " " + workloads::format_shape(valid.shape);
    check_cost(op, valid, gpu);
    check_cost(op, valid, cpu);
  });
  return 0;
}
