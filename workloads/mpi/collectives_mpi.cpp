// MPI backend of the catalogue's collectives on CPU ranks (`rafter profile --op all_reduce` under
// mpirun), through the collector's run_collective: FP32 (MPI_FLOAT) and BF16 (16-bit words; the
// reductions sum them with a user op that widens to FP32 and rounds back to nearest even). Every rank joins first (a rank that does not
// arrive is named), checks rank 0's result on the FP64 reference's random data (outputs poisoned;
// rank 0's verdict is broadcast), then
// times the same number of calls on every rank, each after a barrier; the time is the slowest
// rank's median. Every wait is bounded (Ranks::wait).
#include <fmt/format.h>

#include <algorithm>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "rafter/collector/error.hpp"
#include "rafter/collector/ranks.hpp"
#include "rafter/collector/timing.hpp"
#include "rafter/workloads/backend.hpp"

namespace rafter::workloads {
namespace {

// One rank's buffers in the wire format: 4-byte floats or 2-byte bf16 words.
struct Buffers {
  bool bf16 = false;
  std::vector<float> in32, out32;
  std::vector<std::uint16_t> in16, out16;
  void* in() { return bf16 ? static_cast<void*>(in16.data()) : in32.data(); }
  void* out() { return bf16 ? static_cast<void*>(out16.data()) : out32.data(); }
};

class MpiCollectives final : public Backend {
 public:
  std::string name() const override { return "cpu.mpi"; }
  std::string device_kind() const override { return "cpu"; }
  bool supports(const OpInstance& inst) const override {
    const auto& op = OperatorRegistry::instance().get(inst.op);
    return op.is_collective() && (inst.precision == "fp32" || inst.precision == "bf16") && Ranks::world().mpi();
  }

  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    Ranks& ranks = Ranks::world();
    const std::int64_t n = inst.shape.at("ranks"), S = inst.shape.at("elements");
    RankGroup group;
    try {
      group = rank_group(ranks.rank(), ranks.size(), int(n), group_stride(inst));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", inst.op, e.what()));
    }
    if (S % n != 0) throw InputError(fmt::format("{}: elements={} is not a multiple of ranks={}", inst.op, S, n));
    const bool bf16 = inst.precision == "bf16";
    const std::string what = fmt::format("{} ({})", inst.op, bytes_label(double(S) * (bf16 ? 2 : 4)));
    ranks.join(what);
    record.backend = name();
    if (ctx.check) record.check = check(inst, ctx, bf16, group);
    Buffers b = buffers(inst, bf16, S, nullptr, group);
    time(inst, ctx, b, what, record, group);
    record.status = (!ctx.check || record.check.passed) ? RecordStatus::Ok : RecordStatus::Invalid;
    if (record.status == RecordStatus::Invalid)
      record.note = fmt::format("check failed: rel error {:.3g} > tolerance {:.3g}", record.check.error,
                                record.check.tolerance);
    record.details["ranks"] = n;
    if (n < ranks.size()) record.details["groups"] = describe_groups(group, ranks.size());
    record.details["mpi_datatype"] = bf16 ? "16-bit words, summed by a user op (FP32 add, round to nearest even)"
                                          : "MPI_FLOAT";
  }

 private:
  static std::int64_t out_elements(const std::string& op, std::int64_t S, std::int64_t n) {
    return op == "reduce_scatter" ? S / n : S;
  }

  // This rank's input (row `rank` of its group in the problem's rank_buffers, or zeros-free random
  // data for timing) and a poisoned output.
  static Buffers buffers(const OpInstance& inst, bool bf16, std::int64_t S, const std::vector<double>* rows,
                         const RankGroup& group) {
    const int r = group.rank;
    const std::int64_t n = inst.shape.at("ranks"), out = out_elements(inst.op, S, n);
    Buffers b;
    b.bf16 = bf16;
    auto value = [&](std::int64_t i) { return rows ? (*rows)[std::size_t(r * S + i)] : 1.0 + double(i % 7) / 8; };
    if (bf16) {
      b.in16.resize(std::size_t(S));
      for (std::int64_t i = 0; i < S; ++i) b.in16[std::size_t(i)] = to_bf16(float(value(i)));
      b.out16.assign(std::size_t(out), 0x7fc0);  // NaN: an element the collective does not write fails
    } else {
      b.in32.resize(std::size_t(S));
      for (std::int64_t i = 0; i < S; ++i) b.in32[std::size_t(i)] = float(value(i));
      b.out32.assign(std::size_t(out), std::nanf(""));
    }
    return b;
  }

  static Collective kind(const std::string& op) {
    if (auto c = collective_from_name(op); c && *c != Collective::Broadcast) return *c;
    throw InputError(fmt::format("mpi: no collective named {}", op));
  }

  static void run(const std::string& op, Buffers& b, std::int64_t S, std::string_view what,
                  const RankGroup& group) {
    run_collective(Ranks::world(), kind(op), b.bf16 ? WireType::BF16 : WireType::F32, b.in(), b.out(),
                   std::size_t(S), what, &group);
  }

  // The collective on the reference's random data at the check size (every group the same data);
  // rank 0's output against the FP64 reference (every rank's verdict is the same data path, rank 0's
  // is recorded).
  static CheckResult check(const OpInstance& inst, const ExecContext& ctx, bool bf16,
                           const RankGroup& group) {
    const auto& def = OperatorRegistry::instance().get(inst.op);
    OpInstance small = inst;
    small.shape["elements"] = 64 * inst.shape.at("ranks");
    Problem p = def.make_problem(small, ctx.seed);
    Buffers b = buffers(small, bf16, small.shape["elements"], &p.inputs[0].data, group);
    run(inst.op, b, small.shape["elements"], fmt::format("{} (check)", inst.op), group);
    def.reference(small, p);
    std::vector<double> out;
    if (bf16) for (auto h : b.out16) out.push_back(from_bf16(h));
    else out.assign(b.out32.begin(), b.out32.end());
    CheckResult c = compare_outputs(p, {out}, inst.precision);
    // The reference is rank 0's result: every rank takes rank 0's verdict, so all agree on the status.
    double verdict[2] = {c.passed ? 1.0 : 0.0, c.error};
    Ranks::world().broadcast(verdict, sizeof verdict, 0, fmt::format("{} (check verdict)", inst.op));
    c.passed = verdict[0] != 0;
    c.error = verdict[1];
    c.shape_note = fmt::format("checked at elements={} on rank 0", small.shape["elements"]);
    return c;
  }

  static void time(const OpInstance& inst, const ExecContext& ctx, Buffers& b, const std::string& what,
                   OperatorRecord& record, const RankGroup& group) {
    const std::int64_t S = inst.shape.at("elements");
    const RanksTiming t = time_across_ranks(
        Ranks::world(), ctx.policy, [&] { run(inst.op, b, S, what, group); }, what);
    record.time = Figure::measured(t.summary, "s");
    record.details["time"] = "max over ranks of each rank's median (each call after a barrier)";
    record.details["slowest_rank"] = t.slowest_rank;
  }
};

RAFTER_REGISTER_BACKEND(MpiCollectives);

}  // namespace
}  // namespace rafter::workloads
