// Planning and running suites: device memory levels (hwloc for the CPU), plan_suite (costs only),
// run_instances (memory check first, then each instance checked and timed), step totals.
#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "rafter/collector/environment.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/interrupt.hpp"
#include "rafter/collector/ranks.hpp"
#include "rafter/collector/progress.hpp"
#include "rafter/workloads/memory_plan.hpp"
#include "rafter/workloads/suite.hpp"

namespace rafter::workloads {
namespace {

std::vector<MemoryLevel> cpu_levels() {
  std::vector<MemoryLevel> levels;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return levels;
  hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return levels;
  }
  const int cores = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE));
  const hwloc_obj_type_t types[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE};
  for (int i = 0; i < 3; ++i) {
    const int n = hwloc_get_nbobjs_by_type(topo, types[i]);
    if (n <= 0) continue;
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, types[i], 0);
    MemoryLevel m;
    m.name = fmt::format("L{}", i + 1);
    m.size_bytes = double(o->attr->cache.size);
    m.line_bytes = double(o->attr->cache.linesize);
    m.instances = n;
    m.shared_by_cores = std::max(1, cores / n);
    levels.push_back(m);
  }
  MemoryLevel dram{"DRAM", 0, 64, cores, 1};
  if (hwloc_obj_t root = hwloc_get_root_obj(topo); root) dram.size_bytes = double(root->total_memory);
  levels.push_back(dram);
  hwloc_topology_destroy(topo);
  return levels;
}

// Nominal H100 SXM hierarchy (228 KiB shared memory per SM, 50 MiB L2, 80 GB HBM3) used for GPU
// plans when no machine profile gives the measured device's levels.
std::vector<MemoryLevel> nominal_gpu_levels() {
  return {{"shared", 228.0 * 1024, 128, 1, 132}, {"L2", 50.0 * 1024 * 1024, 128, 132, 1}, {"HBM", 80e9, 64, 132, 1}};
}

// Says before anything runs which instances will be timed on a slice or not run for lack of device
// memory (profile_instance plans each again right before it runs, against the memory then free).
void announce_memory_plan(const std::vector<OpInstance>& instances, const ExecContext& ctx,
                          const std::vector<MemoryLevel>& levels) {
  double free_bytes = -1;
  for (const auto& inst : instances) {
    Backend* backend = backend_for(inst, ctx.device);
    if (!backend) continue;
    if (free_bytes < 0) free_bytes = backend->free_memory_bytes(ctx);
    if (free_bytes <= 0) return;
    const MemoryPlan plan = plan_memory_on(*backend, inst, free_bytes, levels);
    if (plan.verdict != MemoryPlan::Verdict::Fits)
      fmt::print(stderr, "rafter: memory plan: {}\n", plan.note);
  }
}

// The instances from `first` on, as records that did not run because `signal` stopped the run.
void mark_not_run(Run& run, const std::vector<OpInstance>& instances, std::size_t first, const ExecContext& ctx,
                  const std::vector<MemoryLevel>& levels, int signal) {
  run.interrupted = signal_name(signal);
  for (std::size_t k = first; k < instances.size(); ++k) {
    OperatorRecord r = planned_record(instances[k], levels);
    r.device = ctx.device;
    r.status = RecordStatus::NotRun;
    r.note = fmt::format("not run: {} stopped the run", run.interrupted);
    run.records.push_back(std::move(r));
  }
}

bool measured_any(const Run& run) {
  return std::any_of(run.records.begin(), run.records.end(), [](const OperatorRecord& r) { return r.time.has_value(); });
}

}  // namespace

std::vector<MemoryLevel> device_memory_levels(std::string_view device) {
  if (device.rfind("cuda", 0) == 0) return nominal_gpu_levels();
  if (device != "cpu") throw InputError(fmt::format("unknown device '{}' (known: cpu, cuda:N)", device));
  return cpu_levels();
}

Device describe_device_for_run(std::string_view device) {
  Device d;
  d.id = std::string(device);
  d.kind = device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
  d.memory_levels = device_memory_levels(device);
  if (d.kind == "cpu") {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("model name", 0) == 0) {
        d.name = line.substr(line.find(':') + 2);
        break;
      }
    d.cores = d.memory_levels.empty() ? 1 : d.memory_levels.back().shared_by_cores;
    d.threads = d.cores;
  }
  return d;
}

Run plan_suite(const SuiteConfig& config, const std::vector<MemoryLevel>& levels) {
  const ModelConfig m = config.model_file.empty() ? load_model(config.model) : load_model_file(config.model_file);
  const Recipe r = load_recipe(config.precision);
  Run run;
  run.rafter_version = rafter_version();
  run.timestamp = utc_timestamp();
  run.host = host_name();
  run.device.id = "plan";
  run.device.memory_levels = levels;
  run.suite = suite_json(config, m);
  run.conditions = {{"mode", "plan"}};
  for (const auto& inst : expand_suite(config, m, r)) run.records.push_back(planned_record(inst, levels));
  return run;
}

Run run_instances(const std::vector<OpInstance>& instances, const ExecContext& ctx, nlohmann::json suite) {
  const auto levels = device_memory_levels(ctx.device);
  for (const auto& inst : instances) planned_record(inst, levels);  // bad input fails before anything runs
  Run run;
  run.rafter_version = rafter_version();
  run.timestamp = utc_timestamp();
  run.host = host_name();
  run.device = describe_device_for_run(ctx.device);
  run.suite = std::move(suite);
  run.conditions = {{"warm_cache", ctx.warm_cache},
                    {"check", ctx.check},
                    {"seed", ctx.seed},
                    {"threads", ctx.threads},
                    {"repeat_policy",
                     {{"warmup", ctx.policy.warmup},
                      {"min_repeats", ctx.policy.min_repeats},
                      {"max_repeats", ctx.policy.max_repeats},
                      {"min_total_seconds", ctx.policy.min_total_seconds},
                      {"max_total_seconds", ctx.policy.max_total_seconds}}}};
  if (instances.size() > 1) announce_memory_plan(instances, ctx, levels);  // one operator: its record says it
  Progress progress("profile", instances.size());
  for (std::size_t i = 0; i < instances.size(); ++i) {
    const OpInstance& inst = instances[i];
    progress.step(inst.label.empty() ? inst.op : inst.label);
    try {
      if (ctx.before_each) ctx.before_each(i, inst);
      throw_if_interrupted();
      run.records.push_back(profile_instance(inst, ctx, levels));
    } catch (const Interrupted& e) {  // the instance in progress and the rest: not run
      mark_not_run(run, instances, i, ctx, levels, e.signal);
      break;
    } catch (const CommTimeout& e) {  // a rank is gone: keep what finished, the rest did not run
      for (std::size_t k = i; k < instances.size(); ++k) {
        OperatorRecord r = planned_record(instances[k], levels);
        r.device = ctx.device;
        r.status = RecordStatus::NotRun;
        r.note = fmt::format("not run: {}", e.what());
        run.records.push_back(std::move(r));
      }
      run.conditions["comm_error"] = e.what();
      break;
    } catch (const DeviceUnavailable& e) {
      if (!measured_any(run)) throw;  // nothing measured yet: a missing device is one line, exit 2
      OperatorRecord r = planned_record(inst, levels);  // the device went away mid-run: this record
      r.device = ctx.device;                              // fails and the rest still get their try
      r.status = RecordStatus::Failed;
      r.note = e.what();
      run.records.push_back(std::move(r));
    }
  }
  progress.finish();
  return run;
}

Run run_suite(const SuiteConfig& config, const ExecContext& ctx) {
  const ModelConfig m = config.model_file.empty() ? load_model(config.model) : load_model_file(config.model_file);
  return run_instances(expand_suite(config, m, load_recipe(config.precision)), ctx, suite_json(config, m));
}

StepTotals step_totals(const Run& run) {
  StepTotals t;
  for (const auto& r : run.records) {
    const double flops = r.total_flops() * r.count, outer = r.outer_bytes() * r.count;
    t.flops += flops;
    t.bytes_outer += outer;
    if (r.time && (r.status == RecordStatus::Ok || r.status == RecordStatus::Invalid)) {
      t.seconds += r.time->value * r.count;
      t.timed_flops += flops;
      t.timed_bytes_outer += outer;
      ++t.measured;
      t.scaled += r.scaled_from.has_value();
    }
    t.invalid += r.status == RecordStatus::Invalid;
    t.failed += r.status == RecordStatus::Failed;
    t.no_backend += r.status == RecordStatus::NoBackend;
    t.does_not_fit += r.status == RecordStatus::DoesNotFit;
    t.not_run += r.status == RecordStatus::NotRun;
  }
  return t;
}

}  // namespace rafter::workloads
