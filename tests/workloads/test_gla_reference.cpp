// The FP64 references of gated linear attention proved by their defining properties: the
// backward's gradients against central finite differences of the forward (L = Σ dO·o), and the
// decode step against the forward recurrence (stepping a sequence token by token reproduces o).
#include <gtest/gtest.h>

#include <cmath>

#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/operator.hpp"

using namespace rafter;
using namespace rafter::workloads;

namespace {

OpInstance gla(const std::string& phase) {
  const auto& op = OperatorRegistry::instance().get("gla_chunked");
  return normalize_instance(
      op, {"gla_chunked",
           "",
           phase,
           {{"batch", 2}, {"seq", 12}, {"heads", 2}, {"head_dim_k", 5}, {"head_dim_v", 7}, {"chunk", 4}},
           "fp32",
           1});
}

// L = Σ dO·o(inputs) with the forward reference.
double loss(const Problem& bwd, const std::vector<HostTensor>& fwd_inputs) {
  const auto& op = OperatorRegistry::instance().get("gla_chunked");
  const OpInstance fwd = gla("fwd");
  Problem p = op.make_problem(fwd, 1);
  p.inputs = fwd_inputs;
  op.reference(fwd, p);
  double l = 0;
  for (std::size_t i = 0; i < p.outputs[0].data.size(); ++i)
    l += bwd.inputs[4].data[i] * p.outputs[0].data[i];
  return l;
}

}  // namespace

TEST(GlaReference, BackwardMatchesFiniteDifferencesOfTheForward) {
  const auto& op = OperatorRegistry::instance().get("gla_chunked");
  const OpInstance bwd = gla("bwd");
  Problem p = op.make_problem(bwd, 3);
  ASSERT_EQ(p.inputs.size(), 5u);   // q, k, v, g, dO
  ASSERT_EQ(p.outputs.size(), 4u);  // dq, dk, dv, dg
  op.reference(bwd, p);
  const std::vector<HostTensor> fwd_inputs(p.inputs.begin(), p.inputs.begin() + 4);
  const double eps = 1e-6;
  int compared = 0;
  for (std::size_t t = 0; t < 4; ++t) {  // q→dq, k→dk, v→dv, g→dg: every element of each
    SCOPED_TRACE(p.inputs[t].name);
    double max_grad = 0;
    for (double x : p.outputs[t].data) max_grad = std::max(max_grad, std::abs(x));
    ASSERT_GT(max_grad, 0.1);
    for (std::size_t i = 0; i < p.inputs[t].data.size(); ++i) {
      auto plus = fwd_inputs, minus = fwd_inputs;
      plus[t].data[i] += eps;
      minus[t].data[i] -= eps;
      const double numeric = (loss(p, plus) - loss(p, minus)) / (2 * eps);
      // Central differences: truncation O(eps²), cancellation O(|L|·1e-16/eps) ~ 1e-9 here.
      EXPECT_NEAR(p.outputs[t].data[i], numeric, 1e-7 * std::max(1.0, max_grad)) << "element " << i;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2 * 12 * 2 * (3 * 5 + 7));
}

TEST(GlaReference, DecodeStepsReproduceTheForwardRecurrence) {
  const auto& chunked = OperatorRegistry::instance().get("gla_chunked");
  const auto& decode = OperatorRegistry::instance().get("gla_decode");
  const OpInstance fwd = gla("fwd");
  Problem seq = chunked.make_problem(fwd, 5);
  chunked.reference(fwd, seq);
  const std::int64_t B = 2, s = 12, H = 2, dk = 5, dv = 7;
  const OpInstance step =
      normalize_instance(decode, {"gla_decode",
                                  "",
                                  "fwd",
                                  {{"batch", B}, {"heads", H}, {"head_dim_k", dk}, {"head_dim_v", dv}},
                                  "fp32",
                                  1});
  Problem p = decode.make_problem(step, 9);
  ASSERT_EQ(p.inputs.size(), 5u);  // q, k, v, g, state_in
  std::fill(p.inputs[4].data.begin(), p.inputs[4].data.end(), 0.0);
  double worst = 0;
  for (std::int64_t t = 0; t < s; ++t) {
    // Token t of every sequence: [b, t, h, d] of the prefill layout → [b, h, d] of the step.
    for (std::size_t x = 0; x < 4; ++x) {
      const std::int64_t d = x == 2 ? dv : dk;
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t i = 0; i < d; ++i)
            p.inputs[x].data[std::size_t((b * H + h) * d + i)] =
                seq.inputs[x].data[std::size_t(((b * s + t) * H + h) * d + i)];
    }
    decode.reference(step, p);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t j = 0; j < dv; ++j)
          worst = std::max(worst, std::abs(p.outputs[0].data[std::size_t((b * H + h) * dv + j)] -
                                           seq.outputs[0].data[std::size_t(((b * s + t) * H + h) * dv + j)]));
    p.inputs[4].data = p.outputs[1].data;  // the state carries to the next step
  }
  EXPECT_LT(worst, 1e-12);
}

TEST(GlaReference, CpuKernelsOfBackwardAndDecodeAgreeWithTheReferences) {
  ExecContext ctx;
  ctx.policy = RepeatPolicy{0, 1, 1, 0.0, 0.0};
  ctx.warm_cache = true;
  // dk 20, dv 24: not multiples of the kernels' 16 lanes, so their remainder loops are checked too.
  for (const char* precision : {"fp32", "bf16"}) {
    const OpInstance bwd{
        "gla_chunked",
        "",
        "bwd",
        {{"batch", 2}, {"seq", 96}, {"heads", 3}, {"head_dim_k", 20}, {"head_dim_v", 24}, {"chunk", 32}},
        precision,
        1};
    const OpInstance step{"gla_decode", "",
                          "fwd",        {{"batch", 5}, {"heads", 3}, {"head_dim_k", 20}, {"head_dim_v", 24}},
                          precision,    1};
    for (const auto& inst : {bwd, step}) {
      SCOPED_TRACE(inst.op + " " + precision);
      const OperatorRecord r = profile_instance(inst, ctx, {});
      if (r.status == RecordStatus::NoBackend) GTEST_SKIP() << "no AVX2 + FMA: " << r.note;
      EXPECT_EQ(r.backend, "cpu.native");
      EXPECT_EQ(r.status, RecordStatus::Ok) << r.note;
      EXPECT_TRUE(r.check.passed) << "error " << r.check.error << " tolerance " << r.check.tolerance;
      // fp32 storage: only fp32 arithmetic separates the kernels from the FP64 references.
      if (std::string(precision) == "fp32") {
        EXPECT_LT(r.check.error, 1e-5);
      }
    }
  }
}
