// OperatorRecord and Run: helpers and run.json (write and validated read).
#include "rafter/collector/run_record.hpp"

#include <fmt/core.h>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"

namespace rafter {
using nlohmann::json;

std::string_view to_string(RecordStatus s) {
  switch (s) {
    case RecordStatus::Ok: return "ok";
    case RecordStatus::Invalid: return "invalid";
    case RecordStatus::NoBackend: return "no_backend";
    case RecordStatus::Planned: return "planned";
    case RecordStatus::Failed: return "failed";
    case RecordStatus::DoesNotFit: return "does_not_fit";
    case RecordStatus::NotRun: return "not_run";
  }
  return "ok";
}

RecordStatus record_status_from_string(std::string_view s) {
  for (RecordStatus v : {RecordStatus::Ok, RecordStatus::Invalid, RecordStatus::NoBackend, RecordStatus::Planned,
                         RecordStatus::Failed, RecordStatus::DoesNotFit, RecordStatus::NotRun})
    if (to_string(v) == s) return v;
  throw FormatError(fmt::format(
      "unknown status '{}' (ok, invalid, no_backend, planned, failed, does_not_fit, not_run)", s));
}

double OperatorRecord::total_flops() const {
  double t = 0;
  for (const auto& [_, f] : flops) t += f;
  return t;
}

double OperatorRecord::outer_bytes() const {
  if (const LevelBytes* b = bytes_at("HBM")) return b->bytes;
  if (const LevelBytes* b = bytes_at("DRAM")) return b->bytes;
  return compulsory_bytes;
}

const LevelBytes* OperatorRecord::bytes_at(std::string_view level) const {
  for (const auto& b : bytes)
    if (b.level == level) return &b;
  return nullptr;
}

void set_counted_bytes(OperatorRecord& r, std::string_view level, double bytes) {
  for (auto& b : r.bytes) {
    if (b.level != level) continue;
    if (b.source != Source::Counter) b.model_bytes = b.bytes;
    b.bytes = bytes;
    b.source = Source::Counter;
    return;
  }
  r.bytes.emplace_back(std::string(level), bytes, Source::Counter);
}

bool is_link_level(std::string_view level) {
  return level == "nvlink" || level == "network" || level == "pcie";
}

std::optional<double> model_over_measured(const LevelBytes& b) {
  if (b.source != Source::Counter || !b.model_bytes || !(b.bytes > 0)) return std::nullopt;
  return *b.model_bytes / b.bytes;
}

OverlapTotals overlap_totals(const Run& run) {
  OverlapTotals t;
  for (const auto& r : run.records) {
    const auto it = r.details.find("overlap");
    if (it == r.details.end() || !it->is_object()) continue;
    ++t.records;
    t.alone_seconds += it->value("collective_s", 0.0) * r.count;
    t.exposed_seconds += it->value("exposed_collective_s", 0.0) * r.count;
  }
  return t;
}

json to_json(const CheckResult& c) {
  return {{"ran", c.ran},
          {"passed", c.passed},
          {"error", c.error},
          {"tolerance", c.tolerance},
          {"metric", c.metric},
          {"shape_note", c.shape_note}};
}

json to_json(const OperatorRecord& r) {
  json bytes = json::array();
  for (const auto& b : r.bytes) {
    json level = {{"level", b.level}, {"bytes", b.bytes}, {"source", to_string(b.source)}};
    if (b.model_bytes) level["model_bytes"] = *b.model_bytes;
    if (auto ratio = model_over_measured(b)) level["model_over_measured"] = *ratio;
    bytes.push_back(std::move(level));
  }
  json j = {{"op", r.op},
            {"label", r.label},
            {"phase", r.phase},
            {"backend", r.backend},
            {"device", r.device},
            {"shape", r.shape},
            {"precision", r.precision},
            {"emulated", r.emulated},
            {"count", r.count},
            {"status", to_string(r.status)},
            {"flops", r.flops},
            {"bytes", bytes},
            {"compulsory_bytes", r.compulsory_bytes},
            {"check", to_json(r.check)},
            {"clocks", {{"core_hz_before", r.clocks.core_hz_before}, {"core_hz_after", r.clocks.core_hz_after},
                        {"memory_hz_before", r.clocks.memory_hz_before}, {"memory_hz_after", r.clocks.memory_hz_after},
                        {"throttled", r.clocks.throttled}}},
            {"details", r.details},
            {"note", r.note}};
  if (r.emulated) j["emulated_via"] = r.emulated_via;
  if (!r.flops_counted.empty()) j["flops_counted"] = r.flops_counted;
  if (r.write_fraction) j["write_fraction"] = *r.write_fraction;
  if (r.time) j["time"] = to_json(*r.time);
  if (const auto& s = r.scaled_from)
    j["scaled_from"] = {{"axis", s->axis},     {"slice", s->slice},
                        {"full", s->full},     {"factor", s->factor},
                        {"needed_bytes", s->needed_bytes}, {"free_bytes", s->free_bytes}};
  return j;
}

json to_json(const Run& r) {
  json records = json::array();
  for (const auto& rec : r.records) records.push_back(to_json(rec));
  json j = {{"schema", {{"name", kRunSchemaName}, {"version", kRunSchemaVersion}}},
            {"rafter_version", r.rafter_version},
            {"timestamp", r.timestamp},
            {"host", r.host},
            {"device", to_json(r.device)},
            {"suite", r.suite},
            {"conditions", r.conditions},
            {"records", records}};
  if (!r.interrupted.empty()) j["interrupted"] = r.interrupted;
  return j;
}

namespace {

OperatorRecord record_from_json(const JsonReader& r) {
  OperatorRecord o;
  o.op = r.string("op");
  o.label = r.string_or("label", o.op);
  o.phase = r.string_or("phase", "");
  o.backend = r.string_or("backend", "");
  o.device = r.string("device");
  JsonReader shape = r.object("shape");
  for (const auto& [k, v] : shape.raw().items()) o.shape[k] = shape.integer(k);
  o.precision = r.string("precision");
  o.emulated = r.boolean_or("emulated", false);
  o.emulated_via = r.string_or("emulated_via", "");
  if (o.emulated && o.emulated_via.empty()) r.fail("emulated_via", "missing for an emulated record");
  o.count = r.quantity("count");
  if (!(o.count > 0)) r.fail("count", "must be positive");
  try {
    o.status = record_status_from_string(r.string("status"));
  } catch (const FormatError& e) {
    r.fail("status", e.what());
  }
  if (r.has("time")) o.time = figure_from_json(r.object("time"));
  if ((o.status == RecordStatus::Ok || o.status == RecordStatus::Invalid) && !o.time)
    r.fail("time", "missing for a timed record");
  if (o.time && !(o.time->value > 0)) r.fail("time.value", "must be positive");
  if (r.has("scaled_from")) {
    JsonReader s = r.object("scaled_from");
    ScaledFrom sf{s.string("axis"), s.integer("slice"), s.integer("full"), s.quantity("factor"),
                  s.quantity_or("needed_bytes", 0), s.quantity_or("free_bytes", 0)};
    if (!(sf.slice > 0 && sf.slice < sf.full)) s.fail("slice", "must be positive and below full");
    if (!(sf.factor >= 1)) s.fail("factor", "must be at least 1");
    o.scaled_from = sf;
  }
  JsonReader flops = r.object("flops");
  for (const auto& [k, v] : flops.raw().items()) o.flops[k] = flops.quantity(k);
  if (r.has("flops_counted")) {
    JsonReader counted = r.object("flops_counted");
    for (const auto& [k, v] : counted.raw().items()) o.flops_counted[k] = counted.quantity(k);
  }
  for (std::size_t i = 0; i < r.array("bytes").size(); ++i) {
    JsonReader b = r.element("bytes", i);
    LevelBytes lb(b.string("level"), b.quantity("bytes"), Source::Analytic);
    try {
      lb.source = source_from_string(b.string("source"));
    } catch (const FormatError& e) {
      b.fail("source", e.what());
    }
    if (b.has("model_bytes")) {
      if (lb.source != Source::Counter) b.fail("model_bytes", "only a counted level keeps a model figure");
      lb.model_bytes = b.quantity("model_bytes");
    }
    o.bytes.push_back(lb);
  }
  o.compulsory_bytes = r.quantity_or("compulsory_bytes", 0);
  if (r.has("write_fraction")) {
    o.write_fraction = r.number("write_fraction");
    if (!(*o.write_fraction >= 0 && *o.write_fraction <= 1)) r.fail("write_fraction", "must be between 0 and 1");
  }
  if (r.has("check")) {
    JsonReader c = r.object("check");
    o.check = {c.boolean("ran"), c.boolean("passed"), c.number_or("error", 0), c.number_or("tolerance", 0),
               c.string_or("metric", "rel_l2"), c.string_or("shape_note", "")};
  }
  if (r.has("clocks")) {
    JsonReader c = r.object("clocks");
    o.clocks = {c.quantity_or("core_hz_before", 0), c.quantity_or("core_hz_after", 0), c.quantity_or("memory_hz_before", 0),
                c.quantity_or("memory_hz_after", 0), c.boolean_or("throttled", false)};
  }
  if (r.has("details")) o.details = r.object("details").raw();
  o.note = r.string_or("note", "");
  return o;
}

}  // namespace

Run run_from_json(const json& j, std::string_view origin) {
  JsonReader r(j, std::string(origin));
  check_schema(r, kRunSchemaName, kRunSchemaVersion);
  Run run;
  run.rafter_version = r.string("rafter_version");
  run.timestamp = r.string("timestamp");
  run.host = r.string_or("host", "");
  run.device = device_from_json(r.object("device").raw(), fmt::format("{}.device", origin));
  if (r.has("suite")) {
    const JsonReader suite = r.object("suite");
    suite.string_or("phase", "");  // the roofline picks burst or sustained roofs by it
    run.suite = suite.raw();
  }
  if (r.has("conditions")) run.conditions = r.object("conditions").raw();
  run.interrupted = r.string_or("interrupted", "");
  for (std::size_t i = 0; i < r.array("records").size(); ++i) run.records.push_back(record_from_json(r.element("records", i)));
  return run;
}

}  // namespace rafter
