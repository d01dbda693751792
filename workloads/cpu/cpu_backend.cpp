// The two CPU backends: cpu.onednn (GEMMs through oneDNN) and cpu.native (our own kernels for
// the rest). Both check an instance first (a small shape: random FP64 data, outputs poisoned,
// compared with the FP64 reference at the precision's tolerance) and then time the full shape
// (random data in storage precision, caches flushed between repeats unless --warm-cache).
#include <fmt/format.h>

#include "cpu_kernel.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/timing.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/precision.hpp"

namespace rafter::workloads::cpu {
namespace {

CheckResult check_instance(const KernelEntry& entry, const OpInstance& inst, const ExecContext& ctx) {
  const auto& op = OperatorRegistry::instance().get(inst.op);
  const OpInstance small = normalize_instance(op, op.check_instance(inst));
  Problem problem = op.make_problem(small, ctx.seed);
  Problem reference = problem;
  op.reference(small, reference);
  auto kernel = entry.make(small);
  for (std::size_t i = 0; i < kernel->inputs.size(); ++i) kernel->inputs[i].fill_from(problem.inputs.at(i).data);
  kernel->poison();
  kernel->prepare();
  kernel->run();
  const bool sr = shape_value(small, "sr") != 0;
  CheckResult r = compare_outputs(reference, kernel->results(), check_tolerance(inst.op, inst.precision, sr));
  if (small.shape != inst.shape) r.shape_note = "checked at " + format_shape(small.shape);
  return r;
}

CacheFlusher& flusher() {
  static CacheFlusher f;  // 256 MiB: 8x this machine's L3
  return f;
}

class CpuBackend : public Backend {
 public:
  CpuBackend(std::string name, int priority) : name_(std::move(name)), priority_(priority) {}
  std::string name() const override { return name_; }
  std::string device_kind() const override { return "cpu"; }
  int priority() const override { return priority_; }
  bool supports(const OpInstance& inst) const override { return find_kernel(name_, inst) != nullptr; }

  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    const KernelEntry* entry = find_kernel(name_, inst);
    record.backend = name_;
    if (!entry) {
      record.status = RecordStatus::NoBackend;
      return;
    }
    set_pool_threads(ctx.threads);
    try {
      if (ctx.check) record.check = check_instance(*entry, inst, ctx);
      auto kernel = entry->make(inst);
      for (std::size_t i = 0; i < kernel->inputs.size(); ++i) kernel->inputs[i].fill_random(ctx.seed + i);
      for (auto& t : kernel->outputs) t.allocate();
      kernel->prepare();
      std::function<void()> before;
      if (!ctx.warm_cache) before = [] { flusher().flush(); };
      const Summary s = measure_seconds(ctx.policy, [&] { kernel->run(); }, before);
      record.time = Figure::measured(s, "s");
      record.emulated = !kernel->emulated_via.empty();
      record.emulated_via = kernel->emulated_via;
      record.details = kernel->details;
      record.details["threads"] = pool_threads();
      record.details["cache"] = ctx.warm_cache ? "warm" : "flushed between repeats";
      record.status = (!ctx.check || record.check.passed) ? RecordStatus::Ok : RecordStatus::Invalid;
      if (record.status == RecordStatus::Invalid)
        record.note = fmt::format("check failed: rel error {:.3g} > tolerance {:.3g}", record.check.error,
                                  record.check.tolerance);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      record.status = RecordStatus::Failed;
      record.note = e.what();
    }
  }

 private:
  std::string name_;
  int priority_;
};

struct OneDnnBackend : CpuBackend {
  OneDnnBackend() : CpuBackend("cpu.onednn", 10) {}
};
struct NativeBackend : CpuBackend {
  NativeBackend() : CpuBackend("cpu.native", 0) {}
};

RAFTER_REGISTER_BACKEND(OneDnnBackend);
RAFTER_REGISTER_BACKEND(NativeBackend);

}  // namespace
}  // namespace rafter::workloads::cpu
