// Shared by the model and recipe targets: a step expanded in each phase and every operator costed
// on the nominal GPU's memory levels, each cost checked finite and non-negative.
#pragma once
#include "fuzz_common.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/suite.hpp"

namespace rafter::fuzz {

inline const workloads::ModelConfig& reference_model() {
  static const workloads::ModelConfig m = workloads::load_model("llama2-7b");
  return m;
}
inline const workloads::Recipe& reference_recipe() {
  static const workloads::Recipe r = workloads::load_recipe("nvfp4");  // the recipe with the most parts
  return r;
}
inline const std::vector<MemoryLevel>& gpu_levels() {
  static const std::vector<MemoryLevel> levels = workloads::device_memory_levels("cuda:0");
  return levels;
}

inline void check_record(const OperatorRecord& r) {
  for (const auto& [cls, f] : r.flops) check_quantity(f, r.op + " flops " + cls);
  for (const auto& b : r.bytes) check_quantity(b.bytes, r.op + " bytes " + b.level);
  check_quantity(r.compulsory_bytes, r.op + " compulsory_bytes");
  check_quantity(r.count, r.op + " count");
}

inline void plan_every_phase(const workloads::ModelConfig& model, const workloads::Recipe& recipe) {
  for (const char* phase : {"prefill", "decode", "train"}) {
    workloads::SuiteConfig c;
    c.phase = phase;
    c.seq = 256;  // small: the costs are closed forms, the size changes nothing but the numbers
    expect_typed_errors([&] {
      for (const auto& inst : workloads::expand_suite(c, model, recipe))
        check_record(workloads::planned_record(inst, gpu_levels()));
      check_finite_json(workloads::suite_json(c, model), "suite");
    });
  }
}

}  // namespace rafter::fuzz
