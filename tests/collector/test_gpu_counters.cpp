// GPU counted work: the metric -> bytes-per-level / FLOPs-per-precision arithmetic on the values in
// tests/fixtures/gpu_counters/ (no GPU here), the choice of tensor metrics from a chip's list, the
// counted pass's cache control, and malformed input (a metric missing, a negative value).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "rafter/collector/error.hpp"
#include "rafter/collector/gpu_counters.hpp"

using namespace rafter;

namespace {

nlohmann::json fixture() {
  std::ifstream in(std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/gpu_counters/gh100_bf16_gemm.json");
  return nlohmann::json::parse(in);
}

std::map<std::string, double> metrics_of(const nlohmann::json& f) {
  std::map<std::string, double> m;
  for (const auto& [k, v] : f["metrics"].items()) m[k] = v.get<double>();
  return m;
}

}  // namespace

TEST(GpuCounters, LevelsAndPrecisionsFromMetrics) {
  const auto f = fixture();
  const gpu::GpuCountedWork w = gpu::gpu_work_from_metrics(metrics_of(f));
  EXPECT_EQ(w.bytes_by_level.size(), f["expected"]["bytes"].size());
  for (const auto& [k, v] : f["expected"]["bytes"].items()) {
    ASSERT_TRUE(w.bytes_by_level.count(k)) << k;
    EXPECT_DOUBLE_EQ(w.bytes_by_level.at(k), v.get<double>()) << k;
  }
  EXPECT_EQ(w.flops.size(), f["expected"]["flops"].size());  // zero precisions are left out
  for (const auto& [k, v] : f["expected"]["flops"].items()) {
    ASSERT_TRUE(w.flops.count(k)) << k;
    EXPECT_DOUBLE_EQ(w.flops.at(k), v.get<double>()) << k;
  }
}

TEST(GpuCounters, TensorMetricsOncePerSourceType) {
  const auto f = fixture();
  const auto got = gpu::tensor_metrics_of(f["gh100_tensor_base_metrics"].get<std::vector<std::string>>());
  EXPECT_EQ(got, f["expected_tensor_metrics"].get<std::vector<std::string>>());
  const auto all = gpu::counter_metrics(got);
  // 4 byte metrics, shared wavefronts, 2 L2 sector counts, 9 FP instruction counts
  EXPECT_EQ(all.size(), 5 + 2 + 9 + got.size());
  EXPECT_EQ(all.front(), "dram__bytes_read.sum");
}

TEST(GpuCounters, MissingOrNegativeMetricIsAnError) {
  auto m = metrics_of(fixture());
  auto missing = m;
  missing.erase("lts__t_bytes.sum");
  EXPECT_THROW(gpu::gpu_work_from_metrics(missing), InputError);
  m["dram__bytes_write.sum"] = -1;
  EXPECT_THROW(gpu::gpu_work_from_metrics(m), InputError);
}

TEST(GpuCounters, StatusSummary) {
  gpu::GpuCounterStatus s;
  s.reason = "no CUDA device 0";
  EXPECT_EQ(s.summary(), "unavailable (no CUDA device 0)");
  s.available = true;
  s.reason = "gh100";
  EXPECT_EQ(s.summary(), "available (cupti, gh100)");
}

// Values recorded on an H100 (tests/fixtures/gpu_counters/h100_recorded.json): the GEMM's tensor work is
// its 2mnk FLOPs, HBM is DRAM read + write, and neither launch gets a counted shared level (both used
// shared memory, which l1tex bytes miss: 12 KB for the GEMM).
TEST(GpuCounters, RecordedH100Counts) {
  std::ifstream in(std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/gpu_counters/h100_recorded.json");
  const auto f = nlohmann::json::parse(in);
  std::map<std::string, gpu::GpuCountedWork> work;
  for (const auto& [name, rec] : f["records"].items()) {
    std::map<std::string, double> m;
    for (const auto& [k, v] : rec["metrics"].items()) m[k] = v.get<double>();
    work[name] = gpu::gpu_work_from_metrics(m);
    EXPECT_DOUBLE_EQ(work[name].bytes_by_level.at("HBM"),
                     m.at("dram__bytes_read.sum") + m.at("dram__bytes_write.sum")) << name;
    EXPECT_EQ(work[name].bytes_by_level.count("shared"), 0u) << name;
  }
  EXPECT_DOUBLE_EQ(work.at("gemm_bf16_prefill").flops.at("bf16"), 2.0 * 4096.0 * 4096.0 * 4096.0);
  const auto& rms = work.at("rmsnorm").flops;
  EXPECT_DOUBLE_EQ(rms.at("fp32"), 11534336.0 + 33554432.0 + 2 * 22020096.0);  // add + mul + 2 fma
  EXPECT_DOUBLE_EQ(rms.at("fp16"), 2 * 1048576.0);
  // A launch without shared-memory wavefronts counts its l1tex bytes as the shared level.
  std::map<std::string, double> no_smem;
  for (const auto& [k, v] : f["records"]["rmsnorm"]["metrics"].items()) no_smem[k] = v.get<double>();
  no_smem[gpu::kSharedWavefronts] = 0;
  EXPECT_DOUBLE_EQ(gpu::gpu_work_from_metrics(no_smem).bytes_by_level.at("shared"), 100663296.0);
}

// The counted pass's cache control: reset before each pass under a cold timing (as Nsight Compute's
// default), none under a warm one; RAFTER_CUPTI_CACHE overrides, and a value it does not know is an
// error naming it.
TEST(GpuCounters, CacheControlFollowsTheTimingAndTheOverride) {
  EXPECT_EQ(gpu::cache_control_for(true, nullptr), gpu::CacheControl::All);
  EXPECT_EQ(gpu::cache_control_for(false, nullptr), gpu::CacheControl::None);
  EXPECT_EQ(gpu::cache_control_for(true, ""), gpu::CacheControl::All);
  EXPECT_EQ(gpu::cache_control_for(true, "none"), gpu::CacheControl::None);
  EXPECT_EQ(gpu::cache_control_for(false, "all"), gpu::CacheControl::All);
  EXPECT_EQ(gpu::cache_control_for(false, "l2"), gpu::CacheControl::L2);
  EXPECT_STREQ(gpu::to_string(gpu::CacheControl::All), "all");
  EXPECT_STREQ(gpu::to_string(gpu::CacheControl::L2), "l2");
  EXPECT_STREQ(gpu::to_string(gpu::CacheControl::None), "none");
  try {
    gpu::cache_control_for(true, "flush");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("RAFTER_CUPTI_CACHE=flush"), std::string::npos) << e.what();
  }
}

// A pass's counted work adds the HBM write-back after the launch (the lines it left dirty in L2,
// counted behind it) to its HBM bytes, where it was counted; the raw metrics stay what moved inside.
TEST(GpuCounters, WriteBackAfterTheLaunchCountsAtHbm) {
  gpu::CountedPass pass;
  pass.metrics = metrics_of(fixture());
  const double inside = gpu::gpu_work_from_metrics(pass.metrics).bytes_by_level.at("HBM");
  EXPECT_DOUBLE_EQ(gpu::counted_work(pass).bytes_by_level.at("HBM"), inside);  // not counted (-1)
  pass.hbm_written_after = 24e6;
  const gpu::GpuCountedWork w = gpu::counted_work(pass);
  EXPECT_DOUBLE_EQ(w.bytes_by_level.at("HBM"), inside + 24e6);
  EXPECT_EQ(w.bytes_by_level.at("L2"), gpu::gpu_work_from_metrics(pass.metrics).bytes_by_level.at("L2"));
  EXPECT_EQ(w.flops, gpu::gpu_work_from_metrics(pass.metrics).flops);
  // What a counted record and a probe both say of the pass.
  pass.passes = 8, pass.kernels = 1, pass.cache_control = "all", pass.cupti_version = 130401;
  const auto d = gpu::counted_pass_details(pass);
  EXPECT_EQ(d.at("passes"), 8);
  EXPECT_EQ(d.at("kernels"), 1);
  EXPECT_EQ(d.at("cache_control"), "all");
  EXPECT_DOUBLE_EQ(d.at("hbm_written_after_bytes").get<double>(), 24e6);
  EXPECT_EQ(d.at("cupti_version"), 130401);
}

// L2 is the sectors the SMs ask of it (32 bytes each): lts__t_bytes also counts the requests that
// cross the fabric to the other partition (a streaming RMSNorm on the H200: 67.4 MB from the SMs,
// 34.1 MB again over the fabric, 102.0 MB in lts__t_bytes). A recording without the SM sectors
// keeps lts__t_bytes.
TEST(GpuCounters, L2IsWhatTheSmsAskNotTheFabricHopsToo) {
  auto m = metrics_of(fixture());
  const double lts = m.at("lts__t_bytes.sum");
  EXPECT_DOUBLE_EQ(gpu::gpu_work_from_metrics(m).bytes_by_level.at("L2"), lts);
  m[gpu::kL2SectorsFromSms] = 2.1e6;
  m[gpu::kL2SectorsOverFabric] = 1.05e6;
  EXPECT_DOUBLE_EQ(gpu::gpu_work_from_metrics(m).bytes_by_level.at("L2"), 32 * 2.1e6);
  const auto all = gpu::counter_metrics({});
  EXPECT_NE(std::find(all.begin(), all.end(), gpu::kL2SectorsFromSms), all.end());
  EXPECT_NE(std::find(all.begin(), all.end(), gpu::kL2SectorsOverFabric), all.end());
}

// Values recorded on an H200 with CUPTI 13.4's cache control (tests/fixtures/gpu_counters/
// h200_cupti134.json): lts__t_bytes is the SMs' sectors plus the fabric's, the SMs' sectors are the
// streaming operators' L2 model, and with the write-back counted behind the launch their HBM bytes
// are the model's (the GEMM's are not: its tiles re-read operands).
TEST(GpuCounters, RecordedH200CountsUnderCacheControl) {
  std::ifstream in(std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/gpu_counters/h200_cupti134.json");
  const auto f = nlohmann::json::parse(in);
  for (const auto& [name, rec] : f["records"].items()) {
    gpu::CountedPass pass;
    for (const auto& [k, v] : rec["metrics"].items()) pass.metrics[k] = v.get<double>();
    pass.hbm_written_after = rec["hbm_written_after_bytes"].get<double>();
    const gpu::GpuCountedWork w = gpu::counted_work(pass);
    const auto& m = pass.metrics;
    EXPECT_NEAR(m.at("lts__t_bytes.sum"), 32 * (m.at(gpu::kL2SectorsFromSms) + m.at(gpu::kL2SectorsOverFabric)),
                0.01 * m.at("lts__t_bytes.sum"))
        << name;
    EXPECT_DOUBLE_EQ(w.bytes_by_level.at("L2"), 32 * m.at(gpu::kL2SectorsFromSms)) << name;
    EXPECT_DOUBLE_EQ(w.bytes_by_level.at("HBM"),
                     m.at("dram__bytes_read.sum") + m.at(gpu::kDramBytesWritten) + pass.hbm_written_after)
        << name;
    if (name == "gemm_bf16_prefill") continue;
    const double model_hbm = rec["model_bytes"]["HBM"], model_l2 = rec["model_bytes"]["L2"];
    EXPECT_NEAR(w.bytes_by_level.at("HBM") / model_hbm, 1.0, 0.01) << name;
    EXPECT_NEAR(w.bytes_by_level.at("L2") / model_l2, 1.0, 0.01) << name;
    EXPECT_GT(m.at("lts__t_bytes.sum") / model_l2, 1.4) << name;  // what the L2 level read before
  }
}
