// The native GLA forward kernel's paths that the operator check's shape (one sub-chunk per chunk,
// dims multiples of 16) does not reach: scores of earlier sub-chunks through the reference token,
// a chunk that ends in a partial sub-chunk, head dims with tails, and gates small enough that the
// one-reference factorisation k∘e^{−b} would overflow (b reaches −276 inside a chunk of 40).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../../workloads/cpu/cpu_kernel.hpp"
#include "rafter/workloads/operator.hpp"

using namespace rafter::workloads;

namespace {

// max |kernel − reference| / max |reference| over o, for log-gates drawn from [g_lo, g_hi].
double relative_error(const std::string& precision, double g_lo, double g_hi) {
  const auto& op = OperatorRegistry::instance().get("gla_chunked");
  const OpInstance inst = normalize_instance(
      op, {"gla_chunked",
           "",
           "fwd",
           {{"batch", 1}, {"seq", 80}, {"heads", 2}, {"head_dim_k", 37}, {"head_dim_v", 45}, {"chunk", 40}},
           precision,
           1});
  Problem p = op.make_problem(inst, 11);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> gate(g_lo, g_hi);
  for (double& g : p.inputs[3].data) g = gate(rng);
  op.reference(inst, p);
  const auto* entry = cpu::find_kernel("cpu.native", inst);
  if (!entry) return -1;
  auto kernel = entry->make(inst);
  for (std::size_t i = 0; i < kernel->inputs.size(); ++i) kernel->inputs[i].fill_from(p.inputs[i].data);
  kernel->poison();
  kernel->prepare();
  kernel->run();
  const auto got = kernel->results().at(0);
  const auto& want = p.outputs.at(0).data;
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::isnan(got[i]) ? INFINITY : std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

}  // namespace

TEST(CpuGla, ForwardMatchesTheRecurrenceAcrossSubChunksAndTails) {
  const double err = relative_error("fp32", std::log(0.6), std::log(0.99));
  if (err < 0) GTEST_SKIP() << "no native GLA kernel on this CPU";
  EXPECT_LT(err, 2e-6);
}

TEST(CpuGla, ForwardStaysFiniteAndExactUnderStrongDecay) {
  const double err = relative_error("fp32", std::log(1e-3), std::log(0.5));
  if (err < 0) GTEST_SKIP() << "no native GLA kernel on this CPU";
  EXPECT_LT(err, 2e-6);
}

TEST(CpuGla, Bf16ForwardIsWithinItsRounding) {
  const double err = relative_error("bf16", std::log(0.6), std::log(0.99));
  if (err < 0) GTEST_SKIP() << "no native GLA kernel on this CPU";
  EXPECT_LT(err, 1e-2);
}
