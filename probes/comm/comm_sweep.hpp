// The sweep shared by comm.mpi and comm.nccl: every collective, FP32 and BF16, over message sizes
// from 8 B; per size the slowest rank's median time, algorithm bandwidth S/t and bus bandwidth
// S/t·factor; per collective, type and rank count a link ceiling (bus bandwidth at the largest
// size, the sweep in params.sizes) and a latency ceiling (the time at 8 B).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "rafter/collector/ranks.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::probes::comm {

// Prepares buffers for one collective of `count` elements and returns the call to time.
using MakeCall = std::function<std::function<void()>(Collective c, WireType t, std::size_t count, const std::string& what)>;

struct SweepSpec {
  std::string probe;      // "comm.mpi"
  std::string device;     // the ceilings' device: "cpu", "cuda:0"
  std::string link;       // "mpi", "nccl": the resource is "<link>:<ranks>"
  int ranks = 2;
  double max_bytes = 0;   // the largest message
  std::vector<Collective> collectives;
  nlohmann::json params = nlohmann::json::object();  // added to every ceiling's params
  // Optional: what the library chose for the calls since it was last asked (NCCL's algorithm,
  // protocol, channels); asked before and after each size's timing, the answer kept with the size
  // ("choice" in params.sizes, and in the ceilings' params at their size).
  std::function<nlohmann::json()> choice;
};

// The communicator sizes a node's sweep covers: 2, 4, 8 … below `gpus`, then `gpus` itself (one
// GPU: {1}). Tensor-parallel groups are powers of two within a node.
std::vector<int> rank_counts(int gpus);

// Sizes: 8 B, then x8 up to max_bytes; --quick: 8 B, 4 KiB, 1 MiB (capped).
std::vector<double> sweep_sizes(const ProbeOptions& o, double max_bytes);
void sweep_collectives(const ProbeOptions& options, const SweepSpec& spec, const MakeCall& make, MachineProfile& profile);

}  // namespace rafter::probes::comm
