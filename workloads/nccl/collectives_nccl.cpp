// NCCL backend of the catalogue's collectives on CUDA devices, through the collector's NcclGroup:
// one process per GPU under mpirun, or one process over the first `ranks` GPUs from --device
// (ncclCommInitAll, group calls). FP32 and BF16. Every rank joins first; the check runs on the FP64
// reference's random data (outputs poisoned), rank 0's result compared and its verdict broadcast;
// the time is the host wall time from the group's issue to every stream done, the slowest rank's
// median. Every wait is bounded (--comm-timeout). With overlap_m/n/k the step's GEMM also runs
// beside the collective and the overlap is measured (details.overlap, docs/collectives.md).
#include <fmt/format.h>

#include <algorithm>

#include "../cuda/cuda_util.hpp"
#include "../cuda/device_problem.hpp"
#include "rafter/collector/nccl_choice.hpp"
#include "rafter/collector/nccl_group.hpp"
#include "rafter/collector/provenance.hpp"
#include "rafter/workloads/backend.hpp"

namespace rafter::workloads::cuda {
namespace {

Collective collective_of(const std::string& op) {
  if (auto c = collective_from_name(op); c && *c != Collective::Broadcast) return *c;
  throw InputError(fmt::format("nccl: no collective named {}", op));
}

class NcclCollectives final : public Backend {
 public:
  std::string name() const override { return "cuda.nccl"; }
  std::string device_kind() const override { return "cuda"; }
  int priority() const override { return 10; }
  bool supports(const OpInstance& inst) const override {
    return OperatorRegistry::instance().get(inst.op).is_collective() &&
           (inst.precision == "fp32" || inst.precision == "bf16");
  }
  double free_memory_bytes(const ExecContext& ctx) const override { return free_device_bytes(ctx.device); }

  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    const int n = int(inst.shape.at("ranks"));
    const std::int64_t S = inst.shape.at("elements");
    if (S % n != 0) throw InputError(fmt::format("{}: elements={} is not a multiple of ranks={}", inst.op, S, n));
    const DType dt = inst.precision == "bf16" ? DType::BF16 : DType::F32;
    const WireType wt = dt == DType::BF16 ? WireType::BF16 : WireType::F32;
    const Collective c = collective_of(inst.op);
    const std::string what = fmt::format("{} ({})", inst.op, bytes_label(double(S) * double(dtype_bytes(dt))));
    Ranks& ranks = Ranks::world();
    ranks.join(what);
    record.backend = name();
    // Under mpirun ctx.device is this rank's GPU and the group this rank's (stride: a TP×DP grid).
    NcclGroup g(n, current_device_index(ctx.device), group_stride(inst));
    std::vector<DeviceTensor> tensors;  // every member's in and out, alive while the group runs
    if (ctx.check) record.check = check(g, tensors, inst, ctx, dt);
    const std::size_t out = c == Collective::ReduceScatter ? std::size_t(S / n) : std::size_t(S);
    tensors.clear();
    for (NcclGroup::Member& m : g.members()) {
      RAFTER_CUDA_CHECK(cudaSetDevice(m.device));
      m.in = tensors.emplace_back(alloc_tensor(dt, std::size_t(S))).data();
      fill_random(tensors.back(), -1, 1, ctx.seed + std::uint64_t(m.rank));
      m.out = tensors.emplace_back(alloc_tensor(dt, out)).data();
    }
    nccl_choices_take();  // the check's calls are not the timed ones
    auto run = [&](const std::function<void()>& beside) { g.run(c, wt, std::size_t(S), what, beside); };
    const RanksTiming tm = time_across_ranks(
        ranks, ctx.policy, [&] { run({}); }, what);
    record.time = Figure::measured(tm.summary, "s");
    record.status = (!ctx.check || record.check.passed) ? RecordStatus::Ok : RecordStatus::Invalid;
    if (record.status == RecordStatus::Invalid)
      record.note = fmt::format("check failed: rel error {:.3g} > tolerance {:.3g}", record.check.error, record.check.tolerance);
    record.details = {{"ranks", n},
                      {"stride", group_stride(inst)},
                      {"launch", g.mpi() ? "one process per GPU (mpirun)"
                                         : "one process over local GPUs (ncclCommInitAll)"},
                      {"devices", nlohmann::json::array()},
                      {"nccl_version", NcclGroup::version()},
                      {"nccl_choice", nccl_choices_json(nccl_choices_take())},
                      {"time",
                       "host wall time from the group's issue to every stream done, each call after a "
                       "barrier; max over ranks of each rank's median"},
                      {"slowest_rank", tm.slowest_rank}};
    for (const NcclGroup::Member& m : g.members()) record.details["devices"].push_back(m.device);
    if (g.mpi() && n < ranks.size()) record.details["groups"] = describe_groups(g.group(), ranks.size());
    if (shape_value(inst, "overlap_m", 0) > 0) {
      record.details["overlap"] = overlap(g, inst, ctx, run, tm.summary.median, what);
      nccl_choices_take();  // the overlap's calls are not the record's
    }
  }

 private:
  // The GEMM a step runs beside the collective, on a stream of its own on every member's GPU.
  struct Beside {
    Beside(int device, std::uint64_t seed) : device(device), tensors(nullptr, seed) {}
    ~Beside() {
      if (stream) cudaStreamDestroy(stream);
    }
    int device;
    DeviceProblem tensors;
    StreamFn launch;
    cudaStream_t stream = nullptr;
  };

  // Compute/communication overlap: the GEMM overlap_m×n×k (BF16, cuBLASLt's heuristic choice)
  // issued right after the collective, as ZeRO-3 issues the next layer's all-gather before this
  // layer's forward; the GEMM alone and both together timed as the collective was (every rank
  // after a barrier, host wall time to every stream done, the slowest rank's median).
  static nlohmann::json overlap(NcclGroup& g, const OpInstance& inst, const ExecContext& ctx,
                                const std::function<void(const std::function<void()>&)>& run,
                                double collective_s, const std::string& what) {
    OpInstance gemm;
    gemm.op = "gemm", gemm.phase = "fwd", gemm.precision = "bf16";
    gemm.shape = {{"m", inst.shape.at("overlap_m")},
                  {"n", shape_value(inst, "overlap_n", 0)},
                  {"k", shape_value(inst, "overlap_k", 0)},
                  {"batch", 1}};
    gemm = normalize_instance(OperatorRegistry::instance().get("gemm"), gemm);
    std::vector<std::unique_ptr<Beside>> side;
    for (const NcclGroup::Member& m : g.members()) {
      RAFTER_CUDA_CHECK(cudaSetDevice(m.device));
      Beside& b = *side.emplace_back(std::make_unique<Beside>(m.device, ctx.seed + std::uint64_t(m.rank)));
      b.launch = bind_gemm_beside(gemm, b.tensors);
      RAFTER_CUDA_CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
    }
    auto issue = [&] {
      for (auto& b : side) {
        RAFTER_CUDA_CHECK(cudaSetDevice(b->device));
        b->launch(b->stream);
      }
    };
    auto finish = [&] {
      for (auto& b : side) {
        RAFTER_CUDA_CHECK(cudaSetDevice(b->device));
        RAFTER_CUDA_CHECK(cudaStreamSynchronize(b->stream));
      }
    };
    Ranks& ranks = Ranks::world();
    const std::string beside_what = what + " beside a GEMM";
    auto gemm_alone = [&] {
      issue();
      finish();
    };
    auto together = [&] {
      run(issue);
      finish();
    };
    const Summary alone = time_across_ranks(ranks, ctx.policy, gemm_alone, beside_what).summary;
    const Summary both = time_across_ranks(ranks, ctx.policy, together, beside_what).summary;
    const double exposed = std::max(0.0, both.median - alone.median);
    return {{"gemm", format_shape(gemm.shape) + " bf16"},
            {"method",
             "the GEMM on its own stream on every rank's GPU, issued right after the collective; "
             "collective alone, GEMM alone and both timed alike (slowest rank's median)"},
            {"collective_s", collective_s},
            {"gemm_s", to_json(alone)},
            {"together_s", to_json(both)},
            {"serialized_s", collective_s + alone.median},
            {"exposed_collective_s", exposed},
            {"hidden_fraction", std::clamp(1 - exposed / collective_s, 0.0, 1.0)},
            {"overlap_efficiency",
             (collective_s + alone.median - both.median) / std::min(collective_s, alone.median)}};
  }

  // The reference's random data at 64·n elements: member r uploads row r; rank 0's output is
  // compared and the verdict broadcast, so every rank agrees on the status.
  static CheckResult check(NcclGroup& g, std::vector<DeviceTensor>& tensors, const OpInstance& inst,
                           const ExecContext& ctx, DType dt) {
    const auto& def = OperatorRegistry::instance().get(inst.op);
    OpInstance small = inst;
    const std::int64_t S = 64 * inst.shape.at("ranks");
    small.shape["elements"] = S;
    Problem p = def.make_problem(small, ctx.seed);
    round_to(p.inputs[0].data, dt);
    const Collective c = collective_of(inst.op);
    const std::size_t out = c == Collective::ReduceScatter ? std::size_t(S / g.size()) : std::size_t(S);
    DeviceTensor* rank0_out = nullptr;
    tensors.reserve(2 * g.members().size());
    for (NcclGroup::Member& m : g.members()) {
      RAFTER_CUDA_CHECK(cudaSetDevice(m.device));
      const auto* row = p.inputs[0].data.data() + std::size_t(m.rank) * std::size_t(S);
      m.in = tensors.emplace_back(upload(std::vector<double>(row, row + S), dt)).data();
      DeviceTensor& o = tensors.emplace_back(alloc_tensor(dt, out));
      poison(o);
      m.out = o.data();
      if (m.rank == 0) rank0_out = &o;
    }
    g.run(c, dt == DType::BF16 ? WireType::BF16 : WireType::F32, std::size_t(S), fmt::format("{} (check)", inst.op));
    def.reference(small, p);
    CheckResult result;
    double verdict[2] = {0, 0};
    if (rank0_out) {
      RAFTER_CUDA_CHECK(cudaSetDevice(g.members().front().device));
      result = compare_outputs(p, {download(*rank0_out)}, inst.precision);
      verdict[0] = result.passed ? 1 : 0;
      verdict[1] = result.error;
    }
    Ranks::world().broadcast(verdict, sizeof verdict, 0, fmt::format("{} (check verdict)", inst.op));
    result.ran = true;
    result.passed = verdict[0] != 0;
    result.error = verdict[1];
    result.shape_note = fmt::format("checked at elements={} on rank 0", S);
    return result;
  }
};

RAFTER_REGISTER_BACKEND(NcclCollectives);

}  // namespace
}  // namespace rafter::workloads::cuda
