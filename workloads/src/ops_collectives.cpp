// Collectives: all_reduce, all_gather, reduce_scatter, all_to_all, send_recv. Shape: `elements`
// of the full buffer S (nccl-tests convention: all_gather's output, reduce_scatter's input, the
// all_reduce buffer), `ranks` n, `inter_node` (1: the network link, else NVLink), `stride` (under
// mpirun, the distance between a group's ranks: a TP×DP grid's data-parallel groups; ranks.hpp's
// RankGroup).
// Bytes on the link per rank = S·e·factor with DESIGN.md's bus-bandwidth factors: all_reduce
// 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n; send_recv 1.
// FLOPs: the reductions' additions, (n−1)/n·S per rank for all_reduce and reduce_scatter.
// Memory bytes per rank: its input read once and its output written once.
// overlap_m/n/k (0: none) name the BF16 GEMM that the step runs beside the collective (ZeRO-3's
// prefetched all-gather beside a layer's forward): the cost is the collective's alone; cuda.nccl
// measures the overlap (details.overlap, docs/collectives.md).
#include "op_common.hpp"

namespace rafter::workloads {
namespace {

enum class Kind { AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv };

class CollectiveOp : public detail::CatalogueOp {
 public:
  CollectiveOp(std::string name, std::string summary, Kind kind)
      : CatalogueOp(
            std::move(name), std::move(summary),
            {{"elements", 1 << 24, "elements of the full buffer S"},
             {"ranks", 8, "participating ranks n"},
             {"inter_node", 0, "crosses the network rather than NVLink", true},
             {"stride", 0,
              "mpirun ranks between the group's members (0: 1, consecutive; a TP x DP grid's data-parallel "
              "groups: tp)",
              false, true},
             {"overlap_m", 0, "m of a BF16 GEMM the step runs beside the collective (0: none)", false, true},
             {"overlap_n", 0, "n of that GEMM", false, true},
             {"overlap_k", 0, "k of that GEMM", false, true}},
            {"bf16", "fp32", "fp16", "fp8_e4m3"}, {"fwd", "bwd", "step"}),
        kind_(kind) {}
  bool is_collective() const override { return true; }

  double bus_factor(double n) const {
    switch (kind_) {
      case Kind::AllReduce: return 2 * (n - 1) / n;
      case Kind::SendRecv: return 1;
      default: return (n - 1) / n;
    }
  }

  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double S = detail::dimension(inst, "elements"), n = detail::dimension(inst, "ranks");
    const double e = detail::element_bytes(inst);
    Cost c;
    if (kind_ == Kind::AllReduce || kind_ == Kind::ReduceScatter)
      c.flops[std::string(precision_info(inst.precision).compute_class)] = (n - 1) / n * S;
    double in = S, out = S;
    if (kind_ == Kind::AllGather) in = S / n;
    if (kind_ == Kind::ReduceScatter) out = S / n;
    c.compulsory_bytes = (in + out) * e;
    c.compulsory_write_bytes = out * e;
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes);
    c.link = shape_value(inst, "inter_node") ? "network" : "nvlink";
    c.link_bytes = S * e * bus_factor(n);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["ranks"] = std::min<std::int64_t>(full.shape.at("ranks"), 4);
    s.shape["elements"] = 64 * s.shape["ranks"];
    return s;
  }
  // Inputs: one buffer of S elements per rank (the rank's contribution); output: what rank 0 holds.
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const auto S = shape_value(inst, "elements"), n = shape_value(inst, "ranks");
    Problem p;
    p.inputs.push_back(detail::random_tensor("rank_buffers", {n, S}, rng));
    const auto out = (kind_ == Kind::ReduceScatter) ? S / n : S;
    p.outputs.push_back(detail::empty_tensor("rank0_out", {out}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto S = shape_value(inst, "elements"), n = shape_value(inst, "ranks");
    const auto& in = p.inputs[0].data;
    auto& out = p.outputs[0].data;
    const auto shard = S / n;
    for (std::int64_t i = 0; i < std::int64_t(out.size()); ++i) {
      switch (kind_) {
        case Kind::AllReduce:
        case Kind::ReduceScatter:
          out[i] = 0;
          for (std::int64_t r = 0; r < n; ++r) out[i] += in[r * S + i];
          break;
        case Kind::AllGather: out[i] = in[(i / shard) * S + i]; break;              // shard r from rank r
        case Kind::AllToAll: out[i] = in[(i / shard) * S + (i % shard)]; break;     // rank r's chunk 0
        case Kind::SendRecv: out[i] = in[(n > 1 ? 1 : 0) * S + i]; break;           // from rank 1
      }
    }
  }

 private:
  Kind kind_;
};

struct AllReduceOp : CollectiveOp {
  AllReduceOp() : CollectiveOp("all_reduce", "sum across ranks, result on every rank", Kind::AllReduce) {}
};
struct AllGatherOp : CollectiveOp {
  AllGatherOp() : CollectiveOp("all_gather", "every rank's shard to every rank", Kind::AllGather) {}
};
struct ReduceScatterOp : CollectiveOp {
  ReduceScatterOp() : CollectiveOp("reduce_scatter", "sum across ranks, each rank keeps one shard", Kind::ReduceScatter) {}
};
struct AllToAllOp : CollectiveOp {
  AllToAllOp() : CollectiveOp("all_to_all", "each rank sends a distinct chunk to every rank", Kind::AllToAll) {}
};
struct SendRecvOp : CollectiveOp {
  SendRecvOp() : CollectiveOp("send_recv", "point-to-point transfer (pipeline stages)", Kind::SendRecv) {}
};

RAFTER_REGISTER_OPERATOR(AllReduceOp);
RAFTER_REGISTER_OPERATOR(AllGatherOp);
RAFTER_REGISTER_OPERATOR(ReduceScatterOp);
RAFTER_REGISTER_OPERATOR(AllToAllOp);
RAFTER_REGISTER_OPERATOR(SendRecvOp);

}  // namespace
}  // namespace rafter::workloads
