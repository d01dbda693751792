// FLOPs and bytes of every catalogue operator against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "rafter/collector/error.hpp"
#include "rafter/workloads/operator.hpp"
#include "rafter/workloads/precision.hpp"

using namespace rafter;
using namespace rafter::workloads;

namespace {

Cost cost_of(const std::string& op, Shape shape, const std::string& precision, const std::string& phase = "",
             const std::vector<MemoryLevel>& levels = {}) {
  const auto& def = OperatorRegistry::instance().get(op);
  const OpInstance inst = normalize_instance(def, {op, "", phase, std::move(shape), precision, 1});
  return def.cost(inst, levels);
}

double flops(const Cost& c, const std::string& cls) { return c.flops.count(cls) ? c.flops.at(cls) : 0.0; }

const std::vector<MemoryLevel> kLevels{{"L1", 32768, 64, 1, 2}, {"L2", 1 << 20, 64, 1, 2},
                                       {"L3", 32 << 20, 64, 2, 1}, {"DRAM", 1e10, 64, 2, 1}};

}  // namespace

TEST(OperatorCosts, GemmFlopsAndBytesPerPrecision) {
  auto c = cost_of("gemm", {{"m", 128}, {"n", 256}, {"k", 512}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(c, "bf16"), 2.0 * 128 * 256 * 512);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2.0 * (128 * 512 + 512 * 256 + 128 * 256));
  c = cost_of("gemm", {{"m", 64}, {"n", 64}, {"k", 64}, {"batch", 3}}, "fp32");
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), 3 * 2.0 * 64 * 64 * 64);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 3 * 4.0 * (3 * 64 * 64));
  c = cost_of("gemm", {{"m", 32}, {"n", 32}, {"k", 64}}, "int8");
  EXPECT_DOUBLE_EQ(flops(c, "int8"), 2.0 * 32 * 32 * 64);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 32 * 64 + 64 * 32 + 4.0 * 32 * 32);  // int32 output
  c = cost_of("gemm", {{"m", 16}, {"n", 16}, {"k", 64}}, "nvfp4");
  EXPECT_DOUBLE_EQ(flops(c, "fp4"), 2.0 * 16 * 16 * 64);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, (0.5 + 1.0 / 16) * (16 * 64 * 2) + 2.0 * 16 * 16);
  c = cost_of("gemm", {{"m", 16}, {"n", 16}, {"k", 64}}, "fp8_e4m3_e5m2");
  EXPECT_DOUBLE_EQ(flops(c, "fp8"), 2.0 * 16 * 16 * 64);
  EXPECT_THROW(cost_of("gemm", {{"k", 40}}, "nvfp4"), InputError);  // k not a multiple of 16
  EXPECT_THROW(cost_of("gemm", {{"m", 0}}, "bf16"), InputError);
  EXPECT_THROW(cost_of("gemm", {{"q", 3}}, "bf16"), InputError);
  EXPECT_THROW(cost_of("gemm", {}, "fp7"), InputError);
}

TEST(OperatorCosts, GemmTrafficModel) {
  // 4096^3 bf16: L1 sees A once per 16 columns and B once per 16 rows (register tile 16x16).
  const double n = 4096;
  auto c = cost_of("gemm", {{"m", 4096}, {"n", 4096}, {"k", 4096}}, "bf16", "fwd", kLevels);
  ASSERT_EQ(c.bytes.size(), 4u);
  EXPECT_EQ(c.bytes[0].level, "L1");
  EXPECT_EQ(c.bytes[0].source, Source::Analytic);
  EXPECT_DOUBLE_EQ(c.bytes[0].bytes, 2 * (n * n * (n / 16)) * 2 + n * n * 2);
  // DRAM: blocked on half the L3 (16 MiB): bm = sqrt(16 MiB / 4 B) = 2048, bn = 2048.
  EXPECT_DOUBLE_EQ(c.bytes[3].bytes, n * n * 2 * 2 + n * n * 2 * 2 + n * n * 2);
  for (std::size_t i = 1; i < c.bytes.size(); ++i) EXPECT_LE(c.bytes[i].bytes, c.bytes[i - 1].bytes);
  // A problem that fits in L2 moves only its compulsory bytes beyond L2.
  c = cost_of("gemm", {{"m", 64}, {"n", 64}, {"k", 64}}, "bf16", "fwd", kLevels);
  EXPECT_DOUBLE_EQ(c.bytes[2].bytes, c.compulsory_bytes);
  EXPECT_DOUBLE_EQ(c.bytes[3].bytes, c.compulsory_bytes);
}

// GQA decode: on a CPU each query head of a group reads the KV head from L1 (8 heads, 2 KV heads:
// 4 reads of the cache there), on a GPU the group's KV tile passes through shared memory once.
TEST(OperatorCosts, DecodeAttentionGroupSharesItsKvTileOnAGpu) {
  const Shape s{{"batch", 3}, {"kv_len", 100}, {"heads", 8}, {"kv_heads", 2}, {"head_dim", 128}};
  const double kv = 2.0 * 2 * 128 * 3 * 100 * 2;  // K and V, BF16
  const auto cpu = cost_of("attention_decode", s, "bf16", "", kLevels);
  ASSERT_EQ(cpu.bytes[0].level, "L1");
  EXPECT_DOUBLE_EQ(cpu.bytes[0].bytes, cpu.compulsory_bytes + kv * 3);
  EXPECT_DOUBLE_EQ(cpu.bytes[1].bytes, cpu.compulsory_bytes);
  const std::vector<MemoryLevel> gpu{{"shared", 233472, 0, 1, 132},
                                     {"L1", 262144, 128, 1, 132},
                                     {"L2", 52428800, 128, 132, 1},
                                     {"HBM", 85e9, 0, 132, 1}};
  const auto c = cost_of("attention_decode", s, "bf16", "", gpu);
  ASSERT_EQ(c.bytes[0].level, "shared");
  for (const auto& lb : c.bytes) EXPECT_DOUBLE_EQ(lb.bytes, c.compulsory_bytes) << lb.level;
}

TEST(OperatorCosts, GemmTrafficOnAGpuUsesTheTensorCoreTile) {
  // H100-like levels: the innermost is shared memory, read by wgmma in 64 x 256 accumulator tiles:
  // A once per 256 columns of C, B once per 64 rows. (A 16 x 16 register tile would put a
  // compute-bound GEMM under a shared-memory roof it never meets.)
  const std::vector<MemoryLevel> gpu{{"shared", 233472, 0, 1, 132}, {"L1", 262144, 128, 1, 132},
                                     {"L2", 52428800, 128, 132, 1}, {"HBM", 85e9, 0, 132, 1}};
  const double m = 2048, n = 12288, k = 4096;
  auto c = cost_of("gemm", {{"m", 2048}, {"n", 12288}, {"k", 4096}}, "bf16", "fwd", gpu);
  ASSERT_EQ(c.bytes[0].level, "shared");
  EXPECT_DOUBLE_EQ(c.bytes[0].bytes, m * k * 2 * (n / 256) + k * n * 2 * (m / 64) + m * n * 2);
  // Its intensity at shared memory (~51 FLOP/B) is far above the CPU tile's (~8 FLOP/B).
  EXPECT_GT(2 * m * n * k / c.bytes[0].bytes, 40.0);
  const auto cpu = cost_of("gemm", {{"m", 2048}, {"n", 12288}, {"k", 4096}}, "bf16", "fwd", kLevels);
  EXPECT_LT(2 * m * n * k / cpu.bytes[0].bytes, 10.0);
  // L1 and L2 see the cluster's 256 x 256 block of register-resident accumulators.
  ASSERT_EQ(c.bytes[2].level, "L2");
  EXPECT_DOUBLE_EQ(c.bytes[2].bytes, m * k * 2 * (n / 256) + k * n * 2 * (m / 256) + m * n * 2);
}

TEST(OperatorCosts, AttentionCausalPairs) {
  // causal prefill, s = 4: 1+2+3+4 = 10 pairs per head.
  auto c = cost_of("attention_prefill", {{"batch", 2}, {"seq", 4}, {"heads", 8}, {"kv_heads", 2}, {"head_dim", 64}}, "bf16");
  const double P = 2 * 8 * 10.0;
  EXPECT_DOUBLE_EQ(flops(c, "bf16"), 4 * P * 64);
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), 5 * P);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2.0 * 64 * (2 * 2 * 4 * 8 + 2 * 2 * 4 * 2));
  c = cost_of("attention_prefill", {{"batch", 1}, {"seq", 4}, {"heads", 2}, {"kv_heads", 2}, {"head_dim", 64}, {"causal", 0}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(c, "bf16"), 4 * (2 * 16.0) * 64);
  c = cost_of("attention_backward", {{"batch", 1}, {"seq", 4}, {"heads", 2}, {"kv_heads", 2}, {"head_dim", 64}}, "bf16", "bwd");
  EXPECT_DOUBLE_EQ(flops(c, "bf16"), 10 * (2 * 10.0) * 64);
  c = cost_of("attention_decode", {{"batch", 3}, {"kv_len", 100}, {"heads", 8}, {"kv_heads", 2}, {"head_dim", 128}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(c, "bf16"), 4 * 3 * 8 * 100.0 * 128);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2.0 * 128 * (2 * 3 * 8 + 2 * 3 * 100 * 2));
  EXPECT_THROW(cost_of("attention_decode", {{"heads", 6}, {"kv_heads", 4}}, "bf16"), InputError);
  // A given split count changes how the cache is cut, not what is computed or moved; at most kv_len.
  const Shape split{{"batch", 3}, {"kv_len", 100}, {"heads", 8}, {"kv_heads", 2}, {"head_dim", 128}, {"splits", 7}};
  EXPECT_DOUBLE_EQ(cost_of("attention_decode", split, "bf16").compulsory_bytes, c.compulsory_bytes);
  Shape too_many = split;
  too_many["splits"] = 101;
  EXPECT_THROW(cost_of("attention_decode", too_many, "bf16"), InputError);
  const auto& decode = OperatorRegistry::instance().get("attention_decode");
  const OpInstance small = decode.check_instance(normalize_instance(
      decode, {"attention_decode", "", "", {{"batch", 1}, {"kv_len", 4096}, {"splits", 1000}}, "bf16", 1}));
  EXPECT_LE(small.shape.at("splits"), small.shape.at("kv_len"));
  EXPECT_NO_THROW(decode.validate(small));
}

// The row length picks a GPU RMSNorm kernel (a warp a row up to 1024 values, a block beyond): the
// check keeps it, so a record's check runs the kernel it times; only the rows shrink.
TEST(OperatorCosts, RmsnormCheckKeepsTheRowLength) {
  const auto& norm = OperatorRegistry::instance().get("rmsnorm");
  for (std::int64_t hidden : {512, 4096, 8192}) {
    const OpInstance small = norm.check_instance(
        normalize_instance(norm, {"rmsnorm", "bwd", "", {{"tokens", 16384}, {"hidden", hidden}}, "bf16", 1}));
    EXPECT_EQ(small.shape.at("hidden"), hidden);
    EXPECT_EQ(small.shape.at("tokens"), 16);
  }
}

TEST(OperatorCosts, UnfusedAttentionAndGla) {
  const Shape s{{"batch", 1}, {"seq", 8}, {"kv_seq", 16}, {"heads", 4}, {"kv_heads", 2}, {"head_dim", 32}};
  EXPECT_DOUBLE_EQ(flops(cost_of("attention_qk", s, "bf16"), "bf16"), 2.0 * 4 * 8 * 16 * 32);
  EXPECT_DOUBLE_EQ(flops(cost_of("attention_pv", s, "bf16"), "bf16"), 2.0 * 4 * 8 * 16 * 32);
  // Q [1,8,4,32] + K [1,16,2,32] + S [1,4,8,16], and P + V [1,16,2,32] + O [1,8,4,32], 2 bytes each.
  EXPECT_DOUBLE_EQ(cost_of("attention_qk", s, "bf16").compulsory_bytes, 2.0 * (1024 + 1024 + 512));
  EXPECT_DOUBLE_EQ(cost_of("attention_pv", s, "bf16").compulsory_bytes, 2.0 * (512 + 1024 + 1024));
  const auto sm = cost_of("attention_softmax", {{"batch", 1}, {"seq", 8}, {"kv_seq", 16}, {"heads", 4}}, "bf16");
  // Causal (the default): query i sees 8 + i + 1 of the 16 keys, 100 scores a head; all 128 written.
  EXPECT_DOUBLE_EQ(flops(sm, "fp32"), 5.0 * 4 * 100);
  EXPECT_DOUBLE_EQ(sm.compulsory_bytes, 2.0 * 4 * (100 + 128));
  EXPECT_DOUBLE_EQ(sm.compulsory_write_bytes, 2.0 * 4 * 128);
  const auto full = cost_of("attention_softmax", {{"batch", 1}, {"seq", 8}, {"kv_seq", 16}, {"heads", 4}, {"causal", 0}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(full, "fp32"), 5.0 * 4 * 8 * 16);
  EXPECT_DOUBLE_EQ(full.compulsory_bytes, 2 * 2.0 * 4 * 8 * 16);
  const auto g = cost_of("gla_chunked", {{"batch", 1}, {"seq", 128}, {"heads", 2}, {"head_dim_k", 16}, {"head_dim_v", 32}, {"chunk", 64}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(g, "bf16"), 2 * 2.0 * (2 * 64 * 64 * 16 + 2 * 64 * 64 * 32 + 4 * 64 * 16 * 32));
  EXPECT_DOUBLE_EQ(g.compulsory_bytes, 2.0 * 128 * 2 * (3 * 16 + 2 * 32));
}

TEST(OperatorCosts, GlaBackwardAndDecode) {
  // bwd, b=1 h=2 s=128 C=64 dk=16 dv=32: 2 heads x 2 chunks of 6C²dk + 4C²dv + 10C·dk·dv (the
  // gradient products plus recomputed scores and states); fp32 8·b·h·s·dk; reads q, k, v, g, dO
  // (3·16 + 2·32 per token and head) and writes dq, dk, dv, dg (3·16 + 32), bf16.
  const Shape s{{"batch", 1},       {"seq", 128},       {"heads", 2},
                {"head_dim_k", 16}, {"head_dim_v", 32}, {"chunk", 64}};
  const auto g = cost_of("gla_chunked", s, "bf16", "bwd");
  EXPECT_DOUBLE_EQ(flops(g, "bf16"), 4 * (6.0 * 64 * 64 * 16 + 4.0 * 64 * 64 * 32 + 10.0 * 64 * 16 * 32));
  EXPECT_DOUBLE_EQ(flops(g, "fp32"), 8.0 * 2 * 128 * 16);
  EXPECT_DOUBLE_EQ(g.compulsory_bytes, 2.0 * 128 * 2 * ((3 * 16 + 2 * 32) + (3 * 16 + 32)));
  // Traffic: a chunk's working set (state and its gradient 2·2 KiB, 2 passes of 64 rows of
  // 3·16 + 2·32 fp32, the 64x64 scores: 76 KiB) and one head's inputs (2·128·112 = 28 KiB) miss
  // half of L1 (16 KiB), so L1 and L2 also see the state and its gradient per chunk
  // (2·2 heads·2 chunks·2·2 KiB) and the second walk's re-read of the inputs (2 heads·28 KiB);
  // half of L2 (512 KiB) holds both: L3 and DRAM move the compulsory bytes.
  const auto gl = cost_of("gla_chunked", s, "bf16", "bwd", kLevels);
  const double extra = 2 * 2 * 2 * 2 * 2048.0 + 2 * 2.0 * 128 * 112;
  EXPECT_DOUBLE_EQ(gl.bytes[0].bytes, g.compulsory_bytes + extra);
  EXPECT_DOUBLE_EQ(gl.bytes[1].bytes, g.compulsory_bytes + extra);
  EXPECT_DOUBLE_EQ(gl.bytes[2].bytes, g.compulsory_bytes);
  EXPECT_DOUBLE_EQ(gl.bytes[3].bytes, g.compulsory_bytes);
  // decode: b=3 h=2 dk=16 dv=32: 5·dk·dv + dk fp32 per head; q, k, g (16) and v, o (32) in bf16,
  // the fp32 state read and written.
  const auto d =
      cost_of("gla_decode", {{"batch", 3}, {"heads", 2}, {"head_dim_k", 16}, {"head_dim_v", 32}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(d, "fp32"), 6 * (5.0 * 16 * 32 + 16));
  EXPECT_DOUBLE_EQ(flops(d, "bf16"), 0);
  EXPECT_DOUBLE_EQ(d.compulsory_bytes, 6 * (2.0 * (3 * 16 + 2 * 32) + 2 * 4.0 * 16 * 32));
  const auto d32 =
      cost_of("gla_decode", {{"batch", 1}, {"heads", 1}, {"head_dim_k", 256}, {"head_dim_v", 512}}, "fp32",
              "", kLevels);
  EXPECT_DOUBLE_EQ(d32.compulsory_bytes, 4.0 * (3 * 256 + 2 * 512) + 8.0 * 256 * 512);
  EXPECT_DOUBLE_EQ(d32.bytes.back().bytes, d32.compulsory_bytes);
}

TEST(OperatorCosts, MemoryBoundOperators) {
  const double t = 16, h = 256;
  auto c = cost_of("rmsnorm", {{"tokens", 16}, {"hidden", 256}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), 4 * t * h + 3 * t);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2 * t * h * 2 + h * 2);
  c = cost_of("rmsnorm", {{"tokens", 16}, {"hidden", 256}}, "bf16", "bwd");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 3 * t * h * 2 + h * 2 + h * 4);
  c = cost_of("swiglu", {{"tokens", 16}, {"ffn", 256}}, "fp32");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 3 * t * h * 4);
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), 5 * t * h);
  c = cost_of("residual_add", {{"tokens", 16}, {"hidden", 256}}, "bf16");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 3 * t * h * 2);
  c = cost_of("softmax", {{"rows", 16}, {"cols", 256}}, "bf16");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2 * t * h * 2);
  c = cost_of("rope", {{"tokens", 16}, {"heads", 4}, {"head_dim", 64}, {"seq", 16}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), 3 * 16 * 4 * 64.0);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2 * 16 * 4 * 64 * 2.0 + 16 * 64 * 4.0);
  c = cost_of("embedding", {{"tokens", 16}, {"hidden", 256}, {"vocab", 1000}}, "bf16");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 4 * t + 2 * t * h * 2);
  EXPECT_TRUE(c.flops.empty());
  c = cost_of("cross_entropy", {{"tokens", 16}, {"vocab", 1000}}, "bf16", "bwd");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2 * 16 * 1000 * 2.0 + 4 * 16);
  c = cost_of("adamw", {{"params", 1000}}, "bf16", "step");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 1000 * (24 + 4.0));
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), 16 * 1000.0);
  // Streaming: every level beyond L1 moves the compulsory bytes.
  c = cost_of("residual_add", {{"tokens", 16}, {"hidden", 256}}, "bf16", "fwd", kLevels);
  for (const auto& b : c.bytes) EXPECT_DOUBLE_EQ(b.bytes, c.compulsory_bytes);
}

TEST(OperatorCosts, QuantizersAndPatch) {
  const double n = 64 * 256;
  auto c = cost_of("quantize", {{"rows", 64}, {"cols", 256}}, "nvfp4");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2 * n + n / 2 + n / 16 + 4);
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), 5 * n);
  c = cost_of("quantize", {{"rows", 64}, {"cols", 256}, {"block2d", 1}, {"rht", 1}, {"sr", 1}}, "nvfp4");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2 * n + n / 2 + n / 256 + 4);
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), (5 + 32 + 2) * n);
  c = cost_of("quantize", {{"rows", 64}, {"cols", 256}}, "mxfp4");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2 * n + n / 2 + n / 32);
  // The column-wise copy: its writes and its encoding, no second read; the RHT on that copy only.
  c = cost_of("quantize", {{"rows", 64}, {"cols", 256}, {"transpose", 1}, {"rht", 1}, {"sr", 1}}, "nvfp4");
  EXPECT_DOUBLE_EQ(c.compulsory_write_bytes, 2 * (n / 2 + n / 16 + 4));
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2 * n + 2 * (n / 2 + n / 16 + 4));
  EXPECT_DOUBLE_EQ(flops(c, "fp32"), (2 * (5 + 2) + 32) * n);
  // 64 MiB of input beyond a 32 MiB L3: DRAM sees it twice where a tensor scale needs an amax
  // pass first (NVFP4, FP8), once for MXFP4.
  const double big = 4096.0 * 8192;
  c = cost_of("quantize", {{"rows", 4096}, {"cols", 8192}}, "nvfp4", "fwd", kLevels);
  EXPECT_DOUBLE_EQ(c.bytes.back().bytes, c.compulsory_bytes + 2 * big);
  c = cost_of("quantize", {{"rows", 4096}, {"cols", 8192}}, "mxfp4", "fwd", kLevels);
  EXPECT_DOUBLE_EQ(c.bytes.back().bytes, c.compulsory_bytes);
  c = cost_of("dequantize", {{"rows", 64}, {"cols", 256}}, "fp8_e4m3");
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, n + 4 + 2 * n);
  EXPECT_THROW(cost_of("quantize", {{"rows", 8}, {"cols", 256}, {"block2d", 1}}, "nvfp4"), InputError);
  EXPECT_THROW(cost_of("quantize", {{"rows", 8}, {"cols", 40}}, "mxfp4"), InputError);
  c = cost_of("hot_channel_patch", {{"tokens", 64}, {"out", 128}, {"hot", 32}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(c, "bf16"), 2.0 * 64 * 128 * 32);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes, 2.0 * (64 * 32 + 128 * 32 + 2 * 64 * 128));
  // The same patch inside an FP4 GEMM: its BF16 FLOPs and R, W_hot read once; C not read again.
  const auto plain =
      cost_of("gemm", {{"m", 64}, {"n", 128}, {"k", 256}, {"batch", 1}}, "nvfp4", "fwd", kLevels);
  c = cost_of("gemm", {{"m", 64}, {"n", 128}, {"k", 256}, {"batch", 1}, {"hot", 32}}, "nvfp4", "fwd",
              kLevels);
  EXPECT_DOUBLE_EQ(flops(c, "bf16"), 2.0 * 64 * 128 * 32);
  EXPECT_DOUBLE_EQ(c.compulsory_bytes - plain.compulsory_bytes, 2.0 * (64 * 32 + 128 * 32));
  EXPECT_DOUBLE_EQ(c.bytes.back().bytes - plain.bytes.back().bytes, 2.0 * (64 * 32 + 128 * 32));
  // Only FP4 forward GEMMs of one batch carry a patch, of at most k channels.
  EXPECT_THROW(cost_of("gemm", {{"m", 64}, {"n", 128}, {"k", 256}, {"batch", 1}, {"hot", 32}}, "bf16"),
               InputError);
  EXPECT_THROW(
      cost_of("gemm", {{"m", 64}, {"n", 128}, {"k", 256}, {"batch", 1}, {"hot", 32}}, "nvfp4", "bwd_input"),
      InputError);
  EXPECT_THROW(cost_of("gemm", {{"m", 64}, {"n", 128}, {"k", 256}, {"batch", 2}, {"hot", 32}}, "nvfp4"),
               InputError);
  EXPECT_THROW(cost_of("gemm", {{"m", 64}, {"n", 128}, {"k", 256}, {"batch", 1}, {"hot", 512}}, "nvfp4"),
               InputError);
}

TEST(OperatorCosts, CollectivesUseBusBandwidthFactors) {
  const double S = 1 << 20, n = 8;
  auto c = cost_of("all_reduce", {{"elements", 1 << 20}, {"ranks", 8}}, "bf16");
  EXPECT_DOUBLE_EQ(c.link_bytes, S * 2 * 2 * (n - 1) / n);
  EXPECT_EQ(c.link, "nvlink");
  EXPECT_DOUBLE_EQ(flops(c, "bf16"), (n - 1) / n * S);
  c = cost_of("all_gather", {{"elements", 1 << 20}, {"ranks", 8}, {"inter_node", 1}}, "bf16");
  EXPECT_DOUBLE_EQ(c.link_bytes, S * 2 * (n - 1) / n);
  EXPECT_EQ(c.link, "network");
  EXPECT_DOUBLE_EQ(cost_of("reduce_scatter", {{"elements", 1 << 20}, {"ranks", 8}}, "bf16").link_bytes, S * 2 * (n - 1) / n);
  EXPECT_DOUBLE_EQ(cost_of("all_to_all", {{"elements", 1 << 20}, {"ranks", 8}}, "bf16").link_bytes, S * 2 * (n - 1) / n);
  EXPECT_DOUBLE_EQ(cost_of("send_recv", {{"elements", 1 << 20}, {"ranks", 2}}, "fp32").link_bytes, S * 4);
  EXPECT_TRUE(OperatorRegistry::instance().get("all_reduce").is_collective());
  // overlap_m/n/k: 0 is "no GEMM beside it" (the default), a negative size is an input error, and
  // the GEMM beside it changes nothing in the collective's own cost.
  const auto beside =
      cost_of("all_gather",
              {{"elements", 1 << 20}, {"ranks", 8}, {"overlap_m", 64}, {"overlap_n", 128}, {"overlap_k", 32}},
              "bf16");
  EXPECT_DOUBLE_EQ(beside.link_bytes, S * 2 * (n - 1) / n);
  EXPECT_DOUBLE_EQ(beside.compulsory_bytes,
                   cost_of("all_gather", {{"elements", 1 << 20}, {"ranks", 8}}, "bf16").compulsory_bytes);
  EXPECT_THROW(cost_of("all_gather", {{"elements", 1 << 20}, {"ranks", 8}, {"overlap_n", -1}}, "bf16"),
               InputError);
  EXPECT_THROW(cost_of("all_gather", {{"elements", 0}, {"ranks", 8}}, "bf16"),
               InputError);  // only overlap_* may be 0
}

TEST(OperatorCosts, EveryOperatorHasConsistentCosts) {
  for (const auto* op : OperatorRegistry::instance().all()) {
    for (const auto& phase : op->phases()) {
      const OpInstance inst = normalize_instance(*op, {op->name(), "", phase, {}, "", 1});
      const Cost c = op->cost(inst, kLevels);
      EXPECT_GT(c.compulsory_bytes, 0) << op->name();
      ASSERT_EQ(c.bytes.size(), kLevels.size()) << op->name();
      EXPECT_EQ(c.bytes.back().level, "DRAM");
      for (const auto& b : c.bytes) EXPECT_GE(b.bytes, c.compulsory_bytes * 0.999) << op->name() << " " << b.level;
    }
  }
  EXPECT_GE(OperatorRegistry::instance().all().size(), 22u);
}

TEST(Precision, TableIsTheOnePlace) {
  EXPECT_EQ(all_precisions().size(), 12u);
  EXPECT_DOUBLE_EQ(precision_info("nvfp4").bytes_per_element, 0.5 + 1.0 / 16);
  EXPECT_EQ(precision_info("fp8_e5m2").compute_class, "fp8");
  EXPECT_LT(precision_info("fp32").tolerance, precision_info("bf16").tolerance);
  EXPECT_LT(precision_info("bf16").tolerance, precision_info("fp8_e4m3").tolerance);
  EXPECT_LT(check_tolerance("quantize", "nvfp4", false), precision_info("nvfp4").tolerance);
  EXPECT_DOUBLE_EQ(check_tolerance("quantize", "nvfp4", true), precision_info("nvfp4").tolerance);
  EXPECT_THROW(precision_info("fp7"), InputError);
}

// Found by fuzz_operator_cost (fuzz/regressions/operator_cost).
TEST(OperatorCosts, ExtremeShapesStayFiniteOrAreRejected) {
  // Causal softmax with more queries than keys: the first seq - kv_seq queries see nothing
  // (the formula went negative): 4 keys, queries see 0,0,0,0,1,2,3,4 → 10 per head.
  const auto sm = cost_of("attention_softmax", {{"batch", 1}, {"seq", 8}, {"kv_seq", 4}, {"heads", 1}}, "bf16");
  EXPECT_DOUBLE_EQ(flops(sm, "fp32"), 5.0 * 10);
  // 2^48 everywhere: closed-form pair count in double, no int64 product, no loop over seq.
  const std::int64_t big = kMaxShapeValue;
  const auto c = cost_of("attention_prefill", {{"batch", big}, {"seq", big}, {"heads", big}, {"kv_heads", big}, {"head_dim", big}},
                         "bf16", "", kLevels);
  EXPECT_TRUE(std::isfinite(flops(c, "bf16")) && flops(c, "bf16") > 0);
  // A sequence shorter than one 16-row tile (std::clamp had lo > hi).
  const auto short_seq = cost_of("attention_prefill", {{"seq", 8}, {"head_dim", 1 << 20}}, "bf16", "", kLevels);
  for (const auto& b : short_seq.bytes) EXPECT_TRUE(std::isfinite(b.bytes) && b.bytes > 0) << b.level;
  // Unfused QK and PV index K/V by head / (heads / kv_heads): heads must be a multiple.
  EXPECT_THROW(cost_of("attention_qk", {{"heads", 3}, {"kv_heads", 2}}, "bf16"), InputError);
  EXPECT_THROW(cost_of("attention_pv", {{"heads", 2}, {"kv_heads", 4}}, "bf16"), InputError);
}
