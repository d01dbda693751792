// Backends run operator instances on a device: check against the FP64 reference (outputs poisoned
// first, random inputs), then time. CPU backends live in workloads/cpu, CUDA ones in workloads/cuda.
// Added by B (backward compatible): compare_outputs() with an explicit tolerance, planned_record().
// profile_instance() normalizes the instance (defaults, phase) before calling Backend::execute,
// and runs collectives on the backends that support them (workloads/mpi under mpirun).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rafter/collector/run_record.hpp"
#include "rafter/collector/timing.hpp"
#include "rafter/workloads/operator.hpp"

namespace rafter::workloads {

struct ExecContext {
  std::string device = "cpu";      // "cpu", "cuda:0"
  RepeatPolicy policy;
  bool warm_cache = false;         // default: caches flushed between repeats
  bool check = true;               // run the correctness check before timing
  std::uint64_t seed = 42;
  std::string algo = "best";       // GEMM algorithm choice: "best" (time candidates) | "heuristic"
  int threads = 0;                 // CPU threads; 0 = all cores
  bool counters = false;           // a separate counted pass after timing (hardware counters)
  // Called by run_instances right before instance `index` runs (a caller's progress display, a
  // tracer, or a test that makes a fault happen mid-run).
  std::function<void(std::size_t index, const OpInstance& inst)> before_each;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // "cpu.native", "cpu.onednn", "cuda.cublaslt", "cuda.native"
  virtual std::string device_kind() const = 0;  // "cpu" or "cuda"
  virtual int priority() const { return 0; }    // higher wins when several support an instance
  virtual bool supports(const OpInstance& inst) const = 0;
  // Why the backend does not run `inst` though it runs its operator in its precision: a shape past
  // its kernels' limits, one line ("" when it runs it, or never runs that operator and precision).
  // A backend with such limits keeps supports() false for those shapes; the record's no-backend
  // note quotes this.
  virtual std::string shape_limit(const OpInstance& inst) const {
    (void)inst;
    return {};
  }
  // Checks (record.check) and times (record.time, record.clocks) one instance; sets backend,
  // emulated_via (the precision its work ran on, where not its own: profile_instance then marks the
  // record emulated) and details (algorithm, flush policy). Leaves FLOPs/bytes to the caller.
  // Sets record.status to Ok, Invalid (check failed: still timed) or Failed (with note).
  virtual void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) = 0;
  // Memory the device has free now, bytes; 0 when unknown (then nothing is planned).
  virtual double free_memory_bytes(const ExecContext& ctx) const {
    (void)ctx;
    return 0;
  }
  // Device memory an instance needs beyond its tensors' footprint (workspaces, staging copies).
  virtual double extra_memory_bytes(const OpInstance& inst, double footprint_bytes) const {
    (void)inst;
    (void)footprint_bytes;
    return 0;
  }
};

class BackendRegistry {
 public:
  static BackendRegistry& instance();
  bool add(std::unique_ptr<Backend> b);
  // The highest-priority backend of that device kind supporting the instance; nullptr if none.
  Backend* find(std::string_view device_kind, const OpInstance& inst) const;
  std::vector<Backend*> all() const;

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

// Compares backend outputs with the reference; NaN (unwritten poisoned output) fails.
CheckResult compare_outputs(const Problem& reference, const std::vector<std::vector<double>>& outputs,
                            std::string_view precision);

CheckResult compare_outputs(const Problem& reference, const std::vector<std::vector<double>>& outputs,
                            double tolerance);

// A record with the catalogue's cost only (status Planned): what `rafter profile --plan` lists.
OperatorRecord planned_record(const OpInstance& inst, const std::vector<MemoryLevel>& levels);

// The backend that would run `inst` on `device` ("cpu", "cuda:N"), or nullptr; nothing runs.
Backend* backend_for(const OpInstance& inst, std::string_view device);
// Why no backend of `device` runs the (normalized) instance: its precision, or the shape limits of
// the backends that run its operator in that precision (Backend::shape_limit). One line.
std::string no_backend_note(const OpInstance& inst, std::string_view device);

// Fills a record for `inst` on `ctx.device`: catalogue cost (FLOPs, bytes), then the backend's
// check and timing; status NoBackend (and a note) when no backend of that device runs it. Device
// memory is planned first (memory_plan.hpp): a streaming operator too large for the free memory is
// timed on a slice and scaled (record.scaled_from), anything else too large gets DoesNotFit.
OperatorRecord profile_instance(const OpInstance& inst, const ExecContext& ctx,
                                const std::vector<MemoryLevel>& levels);

}  // namespace rafter::workloads

#define RAFTER_REGISTER_BACKEND(Type)                                                    \
  static const bool RAFTER_OP_CONCAT(rafter_backend_registered_, __LINE__) [[maybe_unused]] = \
      ::rafter::workloads::BackendRegistry::instance().add(std::make_unique<Type>())
