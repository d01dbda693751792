// What NCCL chose for each collective it ran — algorithm, protocol, channels, warps — as NCCL itself
// reports it to a profiler plugin (its profiler interface v5, NCCL 2.28 and later). This binary
// exports the plugin (the symbol ncclProfiler_v5); nccl_choices_enable() points NCCL at it
// (NCCL_PROFILER_PLUGIN=STATIC_PLUGIN: NCCL looks the symbol up in the program itself) unless the
// user named a plugin of their own. The plugin only notes the descriptors of collective and
// point-to-point events as NCCL starts them (host side, no GPU timestamps): one mutex and one map
// update per call. No NCCL header is needed: the plugin declares the part of NCCL's documented v5
// ABI it reads, so the recording logic is tested in every build.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rafter {

struct NcclChoice {
  std::string func;      // NCCL's name: "AllReduce", "AllGather", "Send", "Recv", ...
  std::string datatype;  // "ncclBfloat16", ...
  std::size_t count = 0;
  std::string algo, proto;  // collectives: "RING", "TREE", "NVLS", ...; "SIMPLE", "LL", "LL128"
  int channels = 0, warps = 0;
  int peer = -1;  // point-to-point: the remote rank
  int rank = 0;   // the rank that ran it (one process may drive several)
  std::size_t calls = 0;
};

// Sets NCCL_PROFILER_PLUGIN=STATIC_PLUGIN unless it is set; call before the process's first
// communicator (NCCL loads its profiler plugin once per process).
void nccl_choices_enable();
// The calls noted since the last take, one entry per distinct choice (first seen first), counted.
std::vector<NcclChoice> nccl_choices_take();
// For a record's details: the choices, or a line saying why there are none (NCCL loaded no v5
// plugin: NCCL before 2.28, or NCCL_PROFILER_PLUGIN names another plugin).
nlohmann::json nccl_choices_json(const std::vector<NcclChoice>& choices);

}  // namespace rafter
