// Device tensors for one operator instance: either the check problem's FP64 inputs (rounded in
// place to the device's storage type first, so the FP64 reference sees what the GPU sees) or, for
// timing at full size, random data generated on the GPU. Outputs and scratch are poisoned (NaN) first.
#pragma once
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuda_util.hpp"
#include "op_timer.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/operator.hpp"

namespace rafter::workloads::cuda {

class DeviceProblem {
 public:
  // `problem` null: random inputs of the given sizes (timing); else the check problem.
  DeviceProblem(Problem* problem, std::uint64_t seed) : problem_(problem), seed_(seed) {}

  // Input `index` of the problem as `t`, `count` elements; random in [lo, hi) without a problem.
  DeviceTensor& input(std::size_t index, DType t, std::size_t count, double lo = -1, double hi = 1,
                      double scale = 1.0);
  // A poisoned output; `check_index` is its position in problem.outputs (-1: scratch, not checked).
  DeviceTensor& output(DType t, std::size_t count, int check_index, double scale = 1.0);
  // An input that is updated in place and also checked as output `check_index`.
  DeviceTensor& in_out(std::size_t index, DType t, std::size_t count, int check_index, double lo = -1,
                       double hi = 1);
  DeviceTensor& scratch(DType t, std::size_t count);
  // Keeps a tensor made elsewhere (e.g. uploaded in another layout) alive with the others.
  DeviceTensor& adopt(DeviceTensor&& t);
  bool checking() const { return problem_ != nullptr; }
  Problem* problem() const { return problem_; }

  // Downloads the checked outputs in problem.outputs order.
  std::vector<std::vector<double>> results() const;

 private:
  struct Checked {
    DeviceTensor* tensor;
    int index;
    double scale;
  };
  Problem* problem_;
  std::uint64_t seed_;
  std::deque<DeviceTensor> tensors_;  // deque: references stay valid as tensors are added
  std::vector<Checked> checked_;
};

// The GPU backends' common part: device kind "cuda" and the device memory they plan with.
class CudaBackend : public Backend {
 public:
  std::string device_kind() const override { return "cuda"; }
  double free_memory_bytes(const ExecContext& ctx) const override { return free_device_bytes(ctx.device); }
  // Workspaces (cuBLASLt's, the L2 flush buffer's twice-L2), the check problem and the CUDA
  // context's own growth: a fixed 512 MiB plus 5 % of the tensors for allocation rounding.
  double extra_memory_bytes(const OpInstance&, double footprint_bytes) const override {
    return 512.0 * (1 << 20) + 0.05 * footprint_bytes;
  }
};

// Runs the catalogue check for `inst` with `bind` (which allocates through a DeviceProblem and
// returns the launch), comparing with the FP64 reference; fills record.check.
using BindFn = std::function<StreamFn(const OpInstance&, DeviceProblem&)>;
void check_on_device(const OpInstance& inst, const ExecContext& ctx, const BindFn& bind, OperatorRecord& record);
// A contest candidate (a backend with several kernels for one record) checked like a record
// (check_on_device), its result also under cand[name]["check"]; nullopt with ctx.check off. A
// candidate that fails its check is not timed.
std::optional<CheckResult> check_candidate(const OpInstance& inst, const ExecContext& ctx, const BindFn& bind,
                                           nlohmann::json& cand, const std::string& name);
// The contest among a record's checked candidates (name, launch): each timed twice under the
// record's timing conditions (no counters), in the order given and then reversed (AB BA, ABC CBA:
// a drift in clock or temperature weighs on all), its medians under cand[name]["contest_seconds"].
// Returns the index of the winner: `heuristic`, unless a candidate's sum of medians is lower
// (fastest_wins_contest), the candidates asked in the order given.
std::size_t time_contest(const std::vector<std::pair<std::string, StreamFn>>& candidates, std::size_t heuristic,
                         const ExecContext& ctx, nlohmann::json& cand);
// Marks `record` Invalid with a one-line note when its check failed; `label` (if any)
// names what failed, in parentheses after "check failed".
void mark_failed_check(OperatorRecord& record, std::string_view label = {});
// check (unless ctx.check is off), then timing at full size with random data; sets status.
// `after_timing` runs while the full-size tensors are still alive (e.g. to time pieces).
void check_and_time(const OpInstance& inst, const ExecContext& ctx, const BindFn& bind, OperatorRecord& record,
                    const std::function<void()>& after_timing = {});

// A catalogue GEMM (normalized instance) on random data in `d`, cuBLASLt's heuristic first choice,
// for running beside other work on the current device (the NCCL backend's overlap measurement).
StreamFn bind_gemm_beside(const OpInstance& gemm, DeviceProblem& d);

// Runs a backend's work for one record: a CUDA or cuBLASLt error (InputError) marks the record
// Failed with its message, so that the rest of a suite still runs; a missing GPU ends the command.
template <class Body>
void recording_failures(OperatorRecord& record, Body&& body) {
  try {
    body();
  } catch (const DeviceUnavailable&) {
    throw;
  } catch (const InputError& e) {
    record.status = RecordStatus::Failed;
    record.note = e.what();
  }
}

}  // namespace rafter::workloads::cuda
