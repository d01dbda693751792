// The two CPU backends: cpu.onednn (GEMMs through oneDNN) and cpu.native (our own kernels for
// the rest). Both check an instance first (a small shape: random FP64 data, outputs poisoned,
// compared with the FP64 reference at the precision's tolerance) and then time the full shape
// (random data in storage precision, caches flushed between repeats unless --warm-cache; for
// streaming operators a DRAM reference read right before each repeat, see DramReference). With
// --counters, one counted pass after timing (collector's count_cpu_pass: PAPI on every thread).
#include <fmt/format.h>

#include <emmintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "cpu_kernel.hpp"
#include "rafter/collector/counted_work.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/timing.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/precision.hpp"

namespace rafter::workloads::cpu {
namespace {

CheckResult check_instance(const KernelEntry& entry, const OpInstance& inst, const ExecContext& ctx) {
  const auto& op = OperatorRegistry::instance().get(inst.op);
  const OpInstance small = normalize_instance(op, op.check_instance(inst));
  Problem problem = op.make_problem(small, ctx.seed);
  Problem reference = problem;
  op.reference(small, reference);
  auto kernel = entry.make(small);
  for (std::size_t i = 0; i < kernel->inputs.size(); ++i) kernel->inputs[i].fill_from(problem.inputs.at(i).data);
  kernel->poison();
  kernel->prepare();
  kernel->run();
  const bool sr = shape_value(small, "sr") != 0;
  CheckResult r = compare_outputs(reference, kernel->results(), check_tolerance(inst.op, inst.precision, sr));
  if (small.shape != inst.shape) r.shape_note = "checked at " + format_shape(small.shape);
  return r;
}

CacheFlusher& flusher() {
  static CacheFlusher f;  // 256 MiB: 8x this machine's L3
  return f;
}

// A DRAM reference taken in the operator's own conditions, right before each repeat (after the
// flush): an all-core read of 256 MiB and an all-core copy of 128 MiB to 128 MiB streamed past
// the caches; the better of the two is the reference (reads alone and reads plus streamed writes
// top out at different rates: on this 2-core KVM guest ~33 vs ~50 GB/s at the same moment). On a
// shared or virtual machine DRAM bandwidth drifts by tens of percent within seconds (here 22–53
// GB/s a second apart), so a ceiling probed minutes earlier says little about the bandwidth a
// repeat had; the ratio of its DRAM traffic rate to the reference just before it does not move
// with the drift.
class DramReference {
 public:
  static constexpr std::size_t kBytes = std::size_t(256) << 20;
  struct Sample {
    double read, copy;  // bytes per second
  };
  Sample measure() { return {read_bytes_per_second(), copy_bytes_per_second()}; }

 private:
  std::uint64_t* data() {
    if (!buffer_) buffer_ = std::make_unique<Buffer>(kBytes);
    return static_cast<std::uint64_t*>(buffer_->data());
  }
  double read_bytes_per_second() {
    const std::uint64_t* p = data();
    const double t0 = now_seconds();
    parallel_for(std::int64_t(kBytes / 64), [&](std::int64_t b, std::int64_t e, int w) {
      std::uint64_t acc[8] = {};  // eight independent lanes: the loop vectorizes, loads stay in flight
      for (std::int64_t l = b; l < e; ++l)
        for (int j = 0; j < 8; ++j) acc[j] += p[l * 8 + j];
      sink_[std::size_t(w) % sink_.size()] += acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
    }, 4096);
    return double(kBytes) / (now_seconds() - t0);
  }
  double copy_bytes_per_second() {  // first half → second half, non-temporal (SSE2) stores
    std::uint64_t* p = data();
    const std::int64_t half = std::int64_t(kBytes / 2 / 16);  // 16-byte vectors per half
    const auto* src = reinterpret_cast<const __m128i*>(p);
    auto* dst = reinterpret_cast<__m128i*>(p) + half;
    const double t0 = now_seconds();
    parallel_for(half, [&](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t i = b; i < e; ++i) _mm_stream_si128(dst + i, _mm_load_si128(src + i));
      _mm_sfence();
    }, 16384);
    return double(kBytes) / (now_seconds() - t0);
  }
  std::unique_ptr<Buffer> buffer_;
  std::array<std::uint64_t, 64> sink_{};
};

DramReference& dram_reference() {
  static DramReference r;
  return r;
}

// Streaming operators whose DRAM traffic is this large get the paired reference.
constexpr double kPairedReferenceMinBytes = 64.0 * (1 << 20);

// MemAvailable of /proc/meminfo, bytes (0 when unreadable: nothing is planned then).
double available_host_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("MemAvailable:", 0) == 0) return std::strtod(line.c_str() + 13, nullptr) * 1024;
  return 0;
}

// Summary of a series as {median, min, max}.
nlohmann::json series_summary(const std::vector<double>& v) {
  const Summary s = summarize(v);
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

// rafter profile --counters: one counted pass of the call after timing, each event group after the
// same cache flush as the timed repeats. FLOPs a PMU does not split by precision go to the record's
// own FLOP precision. Where counters cannot be read the record keeps its analytic bytes and says why
// (the CLI prints that once per run).
void count_into_record(Kernel& kernel, bool flush, OperatorRecord& record) {
  const std::string precision = record.flops.size() == 1 ? record.flops.begin()->first : record.precision;
  std::function<void()> before;
  if (flush) before = [] { flusher().flush(); };
  try {
    apply_counted_work(count_cpu_pass(before, [&] { kernel.run(); }, precision), record);
    record.details["counters"]["status"] = cpu_counter_status().summary();
  } catch (const DeviceUnavailable& e) {
    record.details["counters"] = {{"status", fmt::format("unavailable ({})", e.what())}};
  }
}

class CpuBackend : public Backend {
 public:
  CpuBackend(std::string name, int priority) : name_(std::move(name)), priority_(priority) {}
  std::string name() const override { return name_; }
  std::string device_kind() const override { return "cpu"; }
  int priority() const override { return priority_; }
  bool supports(const OpInstance& inst) const override { return find_kernel(name_, inst) != nullptr; }
  double free_memory_bytes(const ExecContext&) const override { return available_host_bytes(); }
  // Inputs, outputs and the kernels' staging copies (a converted or dequantized operand) live at once.
  double extra_memory_bytes(const OpInstance&, double footprint) const override {
    return footprint + 64.0 * (1 << 20);
  }

  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    const KernelEntry* entry = find_kernel(name_, inst);
    record.backend = name_;
    if (!entry) {
      record.status = RecordStatus::NoBackend;
      return;
    }
    set_pool_threads(ctx.threads);
    try {
      if (ctx.check) record.check = check_instance(*entry, inst, ctx);
      auto kernel = entry->make(inst);
      for (std::size_t i = 0; i < kernel->inputs.size(); ++i) kernel->inputs[i].fill_random(ctx.seed + i);
      for (auto& t : kernel->outputs) t.allocate();
      kernel->prepare();
      const LevelBytes* dram = record.bytes_at("DRAM");
      const double dram_bytes = dram ? dram->bytes : record.compulsory_bytes;
      const bool paired = !ctx.warm_cache && dram_bytes >= kPairedReferenceMinBytes;
      std::vector<DramReference::Sample> reference;  // per call, warm-ups included (they come first)
      std::vector<double> seconds;
      std::function<void()> before;
      if (!ctx.warm_cache)
        before = [&] {
          flusher().flush();
          if (paired) reference.push_back(dram_reference().measure());
        };
      const Summary s = measure_seconds(ctx.policy, [&] {
        const double t0 = now_seconds();
        kernel->run();
        seconds.push_back(now_seconds() - t0);
      }, before);
      record.time = Figure::measured(s, "s");
      record.emulated = !kernel->emulated_via.empty();
      record.emulated_via = kernel->emulated_via;
      record.details = kernel->details;
      record.details["threads"] = pool_threads();
      record.details["cache"] = ctx.warm_cache ? "warm" : "flushed between repeats";
      if (paired && reference.size() == seconds.size() && seconds.size() >= s.samples) {
        std::vector<double> read, copy, ref, eff;  // the timed calls only: the last s.samples
        for (std::size_t i = seconds.size() - s.samples; i < seconds.size(); ++i) {
          read.push_back(reference[i].read);
          copy.push_back(reference[i].copy);
          ref.push_back(std::max(reference[i].read, reference[i].copy));
          eff.push_back(dram_bytes / seconds[i] / ref.back());
        }
        record.details["dram_reference"] = {
            {"method", "right before each repeat, after the cache flush: the better of an all-core read of 256 MiB "
                       "and an all-core copy of 128 MiB streamed past the caches"},
            {"bytes_per_second", series_summary(ref)},
            {"read_bytes_per_second", series_summary(read)},
            {"copy_bytes_per_second", series_summary(copy)},
            {"efficiency", series_summary(eff)}};
      }
      if (ctx.counters) count_into_record(*kernel, !ctx.warm_cache, record);
      record.status = (!ctx.check || record.check.passed) ? RecordStatus::Ok : RecordStatus::Invalid;
      if (record.status == RecordStatus::Invalid)
        record.note = fmt::format("check failed: rel error {:.3g} > tolerance {:.3g}", record.check.error,
                                  record.check.tolerance);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      record.status = RecordStatus::Failed;
      record.note = e.what();
    }
  }

 private:
  std::string name_;
  int priority_;
};

struct OneDnnBackend : CpuBackend {
  OneDnnBackend() : CpuBackend("cpu.onednn", 10) {}
};
struct NativeBackend : CpuBackend {
  NativeBackend() : CpuBackend("cpu.native", 0) {}
};

RAFTER_REGISTER_BACKEND(OneDnnBackend);
RAFTER_REGISTER_BACKEND(NativeBackend);

}  // namespace
}  // namespace rafter::workloads::cpu
