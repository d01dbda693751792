// NCCL's choices per call through its profiler plugin interface v5 (see nccl_choice.hpp and, for
// the ABI, nccl_profiler_v5.hpp).
#include "rafter/collector/nccl_choice.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <tuple>

#include "rafter/collector/nccl_profiler_v5.hpp"

namespace rafter {
namespace {

using namespace nccl_v5;

// Beyond this many distinct choices between two takes, new ones are not noted (a record drains the
// list after its timing; one collective at one size makes a handful).
constexpr std::size_t kMaxDistinct = 1024;

struct Notes {
  std::mutex mutex;
  std::vector<NcclChoice> order;  // distinct choices, first seen first
  std::atomic<bool> loaded{false};  // NCCL called init: the plugin is in use
};
Notes& notes() {
  static Notes n;
  return n;
}

std::string str(const char* s) { return s ? s : ""; }

// What makes two calls the same choice (whichever rank made them).
auto choice_key(const NcclChoice& c) {
  return std::tie(c.func, c.datatype, c.count, c.algo, c.proto, c.channels, c.warps, c.peer);
}

void note(NcclChoice c) {
  Notes& n = notes();
  std::lock_guard lock(n.mutex);
  for (NcclChoice& seen : n.order)
    if (choice_key(seen) == choice_key(c) && seen.rank == c.rank) {
      ++seen.calls;
      return;
    }
  if (n.order.size() >= kMaxDistinct) return;
  c.calls = 1;
  n.order.push_back(std::move(c));
}

}  // namespace

namespace nccl_v5 {

static int g_context = 0;  // the opaque context NCCL hands back; one for every communicator

static Result plugin_init(void** context, std::uint64_t, int* mask, const char*, int, int, int, LogFn) {
  *context = &g_context;
  *mask = kEventColl | kEventP2p;
  notes().loaded = true;
  return 0;
}

static Result plugin_start_event(void*, void** handle, EventDescr* d) {
  *handle = nullptr;  // nothing to stop: the descriptor says all the plugin keeps
  NcclChoice c;
  c.rank = d->rank;
  if (d->type == kEventColl) {
    c.func = str(d->coll.func);
    c.datatype = str(d->coll.datatype);
    c.count = d->coll.count;
    c.algo = str(d->coll.algo);
    c.proto = str(d->coll.proto);
    c.channels = d->coll.channels;
    c.warps = d->coll.warps;
  } else if (d->type == kEventP2p) {
    c.func = str(d->p2p.func);
    c.datatype = str(d->p2p.datatype);
    c.count = d->p2p.count;
    c.peer = d->p2p.peer;
    c.channels = d->p2p.channels;
  } else {
    return 0;
  }
  note(std::move(c));
  return 0;
}

static Result plugin_stop_event(void*) { return 0; }
static Result plugin_record_event_state(void*, int, void*) { return 0; }
static Result plugin_finalize(void*) { return 0; }

}  // namespace nccl_v5

void nccl_choices_enable() { setenv("NCCL_PROFILER_PLUGIN", "STATIC_PLUGIN", 0); }

std::vector<NcclChoice> nccl_choices_take() {
  Notes& n = notes();
  std::lock_guard lock(n.mutex);
  std::vector<NcclChoice> out;
  out.swap(n.order);
  return out;
}

nlohmann::json nccl_choices_json(const std::vector<NcclChoice>& choices) {
  if (choices.empty()) {
    if (notes().loaded) return "not recorded: NCCL started no event for these calls";
    const char* env = std::getenv("NCCL_PROFILER_PLUGIN");
    return fmt::format(
        "not recorded: NCCL loaded no profiler plugin v5 (NCCL before 2.28, or NCCL_PROFILER_PLUGIN={})",
        env ? env : "(unset)");
  }
  // One entry per choice, the ranks that made it merged.
  nlohmann::json out = nlohmann::json::array();
  std::vector<const NcclChoice*> firsts;
  for (const NcclChoice& c : choices) {
    std::size_t i = 0;
    while (i < firsts.size() && choice_key(*firsts[i]) != choice_key(c)) ++i;
    if (i == firsts.size()) {
      firsts.push_back(&c);
      nlohmann::json e = {{"func", c.func}, {"datatype", c.datatype}, {"count", c.count}};
      if (c.peer >= 0)
        e["peer"] = c.peer;
      else
        e.update({{"algo", c.algo}, {"proto", c.proto}, {"warps", c.warps}});
      e.update({{"channels", c.channels}, {"ranks", nlohmann::json::array()}, {"calls", 0}});
      out.push_back(std::move(e));
    }
    out[i]["ranks"].push_back(c.rank);
    out[i]["calls"] = out[i]["calls"].get<std::size_t>() + c.calls;
  }
  return out;
}

}  // namespace rafter

// The plugin NCCL finds by name in this program (dlsym of "ncclProfiler_v5"); the link exports it
// (--export-dynamic-symbol, see collector/CMakeLists.txt).
extern "C" {
[[gnu::visibility("default"), gnu::used]] rafter::nccl_v5::Profiler ncclProfiler_v5 = {
    "rafter (NCCL's choice per call)",          rafter::nccl_v5::plugin_init,
    rafter::nccl_v5::plugin_start_event,        rafter::nccl_v5::plugin_stop_event,
    rafter::nccl_v5::plugin_record_event_state, rafter::nccl_v5::plugin_finalize};
}
