// Device tensors for checks and timing, and the check-then-time flow of the GPU backends.
#include "device_problem.hpp"

#include <fmt/format.h>

#include "gemm_spec.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/precision.hpp"

namespace rafter::workloads::cuda {

DeviceTensor& DeviceProblem::input(std::size_t index, DType t, std::size_t count, double lo, double hi,
                                   double scale) {
  if (problem_) {
    if (index >= problem_->inputs.size() || problem_->inputs[index].data.size() != count)
      throw InputError(fmt::format("check problem input {} does not have {} elements", index, count));
    round_to(problem_->inputs[index].data, t, scale);
    tensors_.push_back(upload(problem_->inputs[index].data, t, scale));
  } else {
    tensors_.push_back(alloc_tensor(t, count));
    fill_random(tensors_.back(), lo, hi, seed_ + 7919 * tensors_.size());
  }
  return tensors_.back();
}

DeviceTensor& DeviceProblem::output(DType t, std::size_t count, int check_index, double scale) {
  tensors_.push_back(alloc_tensor(t, count));
  poison(tensors_.back());
  if (problem_ && check_index >= 0) checked_.push_back({&tensors_.back(), check_index, scale});
  return tensors_.back();
}

DeviceTensor& DeviceProblem::in_out(std::size_t index, DType t, std::size_t count, int check_index, double lo,
                                    double hi) {
  DeviceTensor& d = input(index, t, count, lo, hi);
  if (problem_ && check_index >= 0) checked_.push_back({&d, check_index, 1.0});
  return d;
}

DeviceTensor& DeviceProblem::scratch(DType t, std::size_t count) {
  tensors_.push_back(alloc_tensor(t, count));
  poison(tensors_.back());  // like an output: a piece that leaves part of it unwritten fails the check
  return tensors_.back();
}

DeviceTensor& DeviceProblem::adopt(DeviceTensor&& t) {
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

std::vector<std::vector<double>> DeviceProblem::results() const {
  std::vector<std::vector<double>> out(problem_ ? problem_->outputs.size() : 0);
  for (const auto& c : checked_) out.at(c.index) = download(*c.tensor, c.scale);
  return out;
}

void check_on_device(const OpInstance& inst, const ExecContext& ctx, const BindFn& bind, OperatorRecord& record) {
  const OperatorDef& def = OperatorRegistry::instance().get(inst.op);
  OpInstance small = def.check_instance(inst);
  Problem problem = def.make_problem(small, ctx.seed);
  DeviceProblem dev(&problem, ctx.seed);
  StreamFn launch = bind(small, dev);  // rounds the problem's inputs to the device types
  def.reference(small, problem);
  launch(nullptr);
  RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
  // Quantizers are compared at check_tolerance's exact-emulation bound, not the format's error.
  record.check = compare_outputs(problem, dev.results(),
                                 check_tolerance(inst.op, inst.precision, shape_value(small, "sr") != 0));
  if (small.shape != inst.shape) {
    std::string note = "checked at";
    for (const auto& [k, v] : small.shape) note += fmt::format(" {}={}", k, v);
    record.check.shape_note = note;
  }
}

void mark_failed_check(OperatorRecord& record, std::string_view label) {
  if (record.check.passed) return;
  record.status = RecordStatus::Invalid;
  record.note = fmt::format("check failed{}: {} {:.3g} > tolerance {:.3g}",
                            label.empty() ? std::string() : fmt::format(" ({})", label), record.check.metric,
                            record.check.error, record.check.tolerance);
}

std::optional<CheckResult> check_candidate(const OpInstance& inst, const ExecContext& ctx, const BindFn& bind,
                                           nlohmann::json& cand, const std::string& name) {
  if (!ctx.check) return std::nullopt;
  OperatorRecord r;
  check_on_device(inst, ctx, bind, r);
  cand[name]["check"] = to_json(r.check);
  return r.check;
}

std::size_t time_contest(const std::vector<std::pair<std::string, StreamFn>>& candidates, std::size_t heuristic,
                         const ExecContext& ctx, nlohmann::json& cand) {
  ExecContext quiet = ctx;
  quiet.counters = false;
  std::vector<std::vector<double>> rounds(candidates.size());
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      const std::size_t i = pass == 0 ? j : candidates.size() - 1 - j;
      rounds[i].push_back(time_operator(candidates[i].second, quiet).seconds.median);
    }
  std::size_t chosen = heuristic;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    cand[candidates[i].first]["contest_seconds"] = rounds[i];
    if (i != chosen && fastest_wins_contest(rounds[i], rounds[chosen], 0.0)) chosen = i;
  }
  return chosen;
}

void check_and_time(const OpInstance& inst, const ExecContext& ctx, const BindFn& bind, OperatorRecord& record,
                    const std::function<void()>& after_timing) {
  require_gpu(ctx.device);
  record.status = RecordStatus::Ok;
  if (ctx.check) {
    check_on_device(inst, ctx, bind, record);
    mark_failed_check(record);
  }
  DeviceProblem full(nullptr, ctx.seed + 1);
  StreamFn launch = bind(inst, full);
  RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
  time_into_record(launch, ctx, record);
  if (after_timing) after_timing();
}

}  // namespace rafter::workloads::cuda
