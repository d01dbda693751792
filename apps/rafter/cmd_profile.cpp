// rafter profile — the operators of a model step or a single operator: --plan lists them with
// their FLOPs and bytes without running anything; --device runs them (check, then timing) and
// writes run.json. --list shows the catalogue, backends, models and recipes.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <regex>

#include "commands.hpp"
#include "rafter/collector/counters.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/interrupt.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/output_lock.hpp"
#include "rafter/collector/ranks.hpp"
#include "rafter/collector/run_record.hpp"
#include "rafter/workloads/memory_plan.hpp"
#include "rafter/workloads/profile_report.hpp"
#include "rafter/workloads/suite.hpp"

namespace rafter::cli {
namespace {

using namespace rafter::workloads;

struct ProfileArgs {
  bool list = false, plan = false, json = false, csv = false, quick = false, warm_cache = false,
       no_check = false, counters = false, replace = false;
  std::string algo = "best";  // GEMM algorithm choice (ExecContext::algo)
  std::string model, model_file, phase, precision = "bf16", dtype, op, shape, device = "cpu", output, machine, filter;
  std::int64_t batch = 1, seq = 2048, kv_len = 0, tp = 1, dp = 1, m = 0, n = 0, k = 0;
  int zero = 0, threads = 0;
  std::uint64_t seed = 42;
  double comm_timeout = Ranks::kDefaultTimeoutSeconds;
};

std::string list_text() {
  std::string out = "operators:\n";
  for (const auto* op : OperatorRegistry::instance().all()) {
    std::string params;
    for (const auto& p : op->params()) params += fmt::format(" {}={}", p.name, p.default_value);
    out += fmt::format("  {:<20} {}\n  {:<20} phases: {}; precisions: {}\n  {:<20} shape:{}\n", op->name(), op->summary(), "",
                       fmt::join(op->phases(), ","), fmt::join(op->precisions(), ","), "", params);
  }
  out += "backends:\n";
  for (const auto* b : BackendRegistry::instance().all())
    out += fmt::format("  {:<20} device: {}, priority {}\n", b->name(), b->device_kind(), b->priority());
  out += fmt::format("models: {}\nprecision recipes: {}\n", fmt::join(available_models(), ", "),
                     fmt::join(available_recipes(), ", "));
  return out;
}

// --m/--n/--k, then --shape (workloads' parse_shape_string), whose values win.
Shape parse_shape(const ProfileArgs& a) {
  Shape s;
  if (a.m) s["m"] = a.m;
  if (a.n) s["n"] = a.n;
  if (a.k) s["k"] = a.k;
  try {
    for (const auto& [key, value] : parse_shape_string(a.shape)) s[key] = value;
  } catch (const InputError& e) {
    throw InputError(fmt::format("--{}", e.what()));
  }
  return s;
}

std::vector<MemoryLevel> plan_levels(const ProfileArgs& a) {
  if (a.machine.empty()) return device_memory_levels(a.device);
  const auto profile = machine_profile_from_json(read_json_file(a.machine), a.machine);
  const Device* d = profile.find_device(a.device);
  if (!d && !profile.devices.empty()) d = &profile.devices.front();
  if (!d) throw InputError(fmt::format("{}: no device in the machine profile", a.machine));
  return d->memory_levels;
}

SuiteConfig suite_config(const ProfileArgs& a) {
  SuiteConfig c;
  c.model = a.model;
  c.model_file = a.model_file;
  c.phase = a.phase.empty() ? "train" : a.phase;
  c.batch = a.batch;
  c.seq = a.seq;
  c.kv_len = a.kv_len;
  c.precision = a.precision;
  c.tp = a.tp;
  c.zero = a.zero;
  c.dp = a.dp;
  return c;
}

std::vector<OpInstance> selected_instances(const ProfileArgs& a, nlohmann::json& suite) {
  std::vector<OpInstance> instances;
  if (!a.op.empty()) {
    const auto& def = OperatorRegistry::instance().get(a.op);
    OpInstance inst{a.op, "", a.phase, parse_shape(a), a.dtype.empty() ? std::string() : a.dtype, 1};
    instances.push_back(normalize_instance(def, inst));
    suite = {{"op", a.op}};
  } else {
    const SuiteConfig c = suite_config(a);
    const ModelConfig m = c.model_file.empty() ? load_model(c.model) : load_model_file(c.model_file);
    instances = expand_suite(c, m, load_recipe(c.precision));
    suite = suite_json(c, m);
  }
  if (!a.filter.empty()) {
    std::regex re;
    try {
      re = std::regex(a.filter);
    } catch (const std::regex_error&) {
      throw InputError(fmt::format("--filter: invalid regular expression '{}'", a.filter));
    }
    std::erase_if(instances, [&](const OpInstance& i) {
      return !std::regex_search(i.op, re) && !std::regex_search(i.label, re);
    });
  }
  return instances;
}

// A planned record with the backend `device` would run it on (status no_backend when none), and
// where that device can say its free memory, what the memory plan would do (a slice, or
// does_not_fit). Nothing runs.
OperatorRecord plan_on_device(const OpInstance& inst, const std::string& device, const std::vector<MemoryLevel>& levels) {
  OperatorRecord r = planned_record(inst, levels);
  r.device = device;
  Backend* backend = backend_for(inst, device);
  if (!backend) {
    r.status = RecordStatus::NoBackend;
    r.note = no_backend_note(inst, device);
    return r;
  }
  r.backend = backend->name();
  ExecContext ctx;
  ctx.device = device;
  const MemoryPlan plan = plan_memory_on(*backend, inst, backend->free_memory_bytes(ctx), levels);
  if (plan.verdict == MemoryPlan::Verdict::DoesNotFit) r.status = RecordStatus::DoesNotFit;
  r.scaled_from = plan.scaled;
  r.note = plan.note;
  return r;
}

void emit(const ProfileArgs& a, const Run& run, bool planned) {
  if (Ranks::world().rank() != 0) return;  // under mpirun only rank 0 prints and writes
  if (a.json) fmt::print("{}\n", to_json(run).dump(2));
  else if (a.csv) fmt::print("{}", planned ? plan_csv(run) : run_csv(run));
  else fmt::print("{}", planned ? plan_table(run) : run_table(run));
  if (!a.output.empty()) write_measured_file(a.output, to_json(run).dump(2) + "\n");
}

// run.conditions.counters for --counters: what the records' counted passes said (the first record
// with a counter status), else the CPU's counter status (a note on stderr once when unavailable).
std::string counters_condition(const Run& run, const std::string& device) {
  const bool gpu = device.rfind("cuda", 0) == 0;
  if (!gpu) note_counters_unavailable_once();  // silent where the CPU's counters can be read
  for (const auto& r : run.records)
    if (r.details.contains("counters") && r.details["counters"].contains("status"))
      return r.details["counters"]["status"].get<std::string>();
  if (gpu) return "not counted (no operator ran on the GPU)";
  const CounterStatus& s = cpu_counter_status();
  return s.available ? "not counted (" + s.summary() + "; no counted pass ran)" : s.summary();
}

// The file already at the output path, read before anything runs. A run's records are measured
// work, and anything else there (a machine profile, a report) may be too: neither is overwritten
// unless --replace. A plan (nothing measured) and an empty file (mktemp's) are, and so is the
// default ./run.json of a run without -o.
void refuse_to_overwrite(const std::string& path) {
  if (!output_holds_a_file(path)) return;
  Run earlier;
  try {
    earlier = run_from_json(read_json_file(path), path);
  } catch (const InputError& e) {
    throw InputError(fmt::format(
        "-o {}: the file there is not a rafter run ({}); not overwritten (--replace overwrites it)", path,
        e.what()));
  }
  if (earlier.conditions.value("mode", "") == "plan") return;
  throw InputError(fmt::format(
      "-o {}: the file there holds a measured run ({} record(s), {}); not overwritten (--replace overwrites "
      "it)",
      path, earlier.records.size(), earlier.timestamp.empty() ? "no timestamp" : earlier.timestamp));
}

void run_profile(const ProfileArgs& a) {
  if (a.list) {
    fmt::print("{}", list_text());
    return;
  }
  if (a.op.empty() && a.model.empty() && a.model_file.empty())
    throw InputError("say what to profile: --model NAME, --model-file PATH or --op NAME (see --list)");
  if (!a.op.empty() && (!a.model.empty() || !a.model_file.empty())) throw InputError("--op and --model are exclusive");
  ProfileArgs out = a;  // runs always write run.json (default ./run.json); plans only with -o
  if (!a.plan && out.output.empty()) out.output = "run.json";
  Ranks& ranks = Ranks::world();
  ranks.set_timeout_seconds(a.comm_timeout);
  std::optional<OutputLock> lock;  // one measuring run per output file (a plan measures nothing: none)
  if (!out.output.empty())
    on_rank0_for_all_ranks(ranks, [&] {  // one broadcast under mpirun: the path's check and its lock
      check_writable(out.output);
      if (!a.plan) lock.emplace(out.output);  // before the file is read: no other run writes it after
      if (!a.output.empty() && !a.replace)
        refuse_to_overwrite(out.output);  // the default ./run.json is scratch
    });
  nlohmann::json suite;
  const auto instances = selected_instances(a, suite);
  if (a.plan) {
    const auto levels = plan_levels(a);
    Run run;
    run.device.id = a.device;
    run.device.memory_levels = levels;
    run.suite = suite;
    run.conditions = {{"mode", "plan"}};
    for (const auto& i : instances) run.records.push_back(plan_on_device(i, a.device, levels));
    emit(out, run, true);
    return;
  }
  InterruptScope interrupts;  // a first Ctrl-C stops after the current repeat and keeps what finished
  ExecContext ctx;
  ctx.device = rank_device(a.device, ranks.info());  // under mpirun: one GPU per rank
  ctx.policy = a.quick ? RepeatPolicy::quick() : RepeatPolicy{};
  ctx.warm_cache = a.warm_cache;
  ctx.check = !a.no_check;
  ctx.seed = a.seed;
  ctx.threads = a.threads;
  ctx.counters = a.counters;
  ctx.algo = a.algo;
  Run run = run_instances(instances, ctx, suite);
  run.conditions["quick"] = a.quick;
  if (ranks.size() > 1) run.conditions["ranks"] = {{"size", ranks.size()}, {"launcher", ranks.info().launcher}};
  if (a.counters) run.conditions["counters"] = counters_condition(run, a.device);
  // One operator that does not fit the device is a size that does not fit, and one that no backend
  // of the device runs (in its precision, or at its shape) an operator the device lacks: one line
  // naming why, exit 2. In a model step such records are listed and the rest run.
  if (!a.op.empty() && run.records.size() == 1 &&
      (run.records.front().status == RecordStatus::DoesNotFit ||
       run.records.front().status == RecordStatus::NoBackend))
    throw InputError(run.records.front().note);
  emit(out, run, false);
  if (run.conditions.contains("comm_error"))  // finished records are written; the run still failed
    throw CommTimeout(run.conditions["comm_error"].get<std::string>());
  if (!run.interrupted.empty()) {
    const auto not_run = std::count_if(run.records.begin(), run.records.end(),
                                       [](const OperatorRecord& r) { return r.status == RecordStatus::NotRun; });
    throw interrupted_status(fmt::format("wrote {} with {} finished record(s); {} not run", out.output,
                                         run.records.size() - std::size_t(not_run), not_run));
  }
  const auto totals = step_totals(run);
  if (totals.invalid || totals.failed) {
    std::fflush(stdout);
    fmt::print(stderr, "rafter: error: {} operator(s) failed their correctness check or did not run (see {})\n",
               totals.invalid + totals.failed, out.output);
    throw ExitStatus{1};  // the CLI's verdict: results are written, but the run is not trustworthy
  }
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  auto* sub = app.add_subcommand("profile", "Profile LLM operators: a model step (--model) or one operator (--op)");
  sub->add_flag("--list", a->list, "List operators, backends, models and precision recipes");
  sub->add_flag("--plan", a->plan, "List the operators with FLOPs and bytes without running anything");
  sub->add_option("--model", a->model, "Model: llama2-7b, llama2-13b, llama2-70b, gla-1.3b, or a file's name");
  sub->add_option("--model-file", a->model_file, "Model JSON file (see workloads/models/)");
  sub->add_option("--phase", a->phase, "Model: prefill|decode|train (default train); --op: fwd|bwd|bwd_input|bwd_weight|step");
  sub->add_option("--batch", a->batch, "Sequences per step")->capture_default_str();
  sub->add_option("--seq", a->seq, "Tokens per sequence")->capture_default_str();
  sub->add_option("--kv-len", a->kv_len, "Decode: cached tokens (default: --seq)");
  sub->add_option("--precision", a->precision, "Precision recipe: bf16|fp8|nvfp4 or a recipe file")->capture_default_str();
  sub->add_option("--tp", a->tp, "Tensor-parallel ranks (Megatron sharding)")->capture_default_str();
  sub->add_option("--zero", a->zero, "ZeRO stage 0-3 (train)")->capture_default_str();
  sub->add_option("--dp", a->dp, "Data-parallel ranks")->capture_default_str();
  sub->add_option("--op", a->op, "A single operator (see --list)");
  sub->add_option("--dtype", a->dtype, "The single operator's precision (default: its first)");
  sub->add_option("--m", a->m, "GEMM rows");
  sub->add_option("--n", a->n, "GEMM columns");
  sub->add_option("--k", a->k, "GEMM reduction length");
  sub->add_option("--shape", a->shape, "Shape parameters key=value,... (e.g. tokens=4096,hidden=4096)");
  sub->add_option("--device", a->device, "cpu or cuda:N")->capture_default_str();
  sub->add_option("--machine", a->machine, "machine.json whose memory levels the plan's traffic model uses");
  sub->add_option("--filter", a->filter, "Regex over operator names and labels: keep only matches");
  sub->add_flag("--json", a->json, "Print JSON (run.json schema) instead of a table");
  sub->add_flag("--csv", a->csv, "Print CSV instead of a table");
  sub->add_option("-o,--output", a->output, "Write run.json here (runs: default ./run.json)");
  sub->add_flag("--replace", a->replace,
                "Overwrite the file at -o (default: a measured run or any other file there is refused)");
  sub->add_flag("--quick", a->quick, "Fewer repeats (fast run)");
  sub->add_flag("--warm-cache", a->warm_cache, "Keep caches warm between repeats (default: flushed)");
  sub->add_flag("--no-check", a->no_check, "Skip the correctness check (results are not trustworthy)");
  sub->add_flag("--counters", a->counters,
                "After timing, one counted pass per operator (GPU: CUPTI user replay; CPU: PAPI): measured bytes per "
                "level and FLOPs per precision; analytic bytes kept where counters are unavailable");
  sub->add_option("--algo", a->algo, "GEMM algorithm: best (time cuBLASLt's candidates) or heuristic (its first)")
      ->check(CLI::IsMember({"best", "heuristic"}))
      ->capture_default_str();
  sub->add_option("--threads", a->threads, "CPU threads (default: all cores)");
  sub->add_option("--comm-timeout", a->comm_timeout, "Seconds any wait for the other ranks may last (mpirun)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--seed", a->seed, "Random seed of the problem data")->capture_default_str();
  sub->callback([a] { run_profile(*a); });
}

}  // namespace rafter::cli
