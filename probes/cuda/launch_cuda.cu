// cuda.launch: the launch floor, an empty kernel (one thread that returns) timed three ways:
//   operator    as rafter times every GPU operator (collector's time_each_launch: a CUDA graph of
//               N x (L2 read-flush, event, kernel, event), each event pair one sample): no operator
//               time rafter records can fall below it, so it is the floor the charts draw;
//   graph_node  back-to-back nodes of one graph, per node: a step captured as one CUDA graph;
//   stream      back-to-back launches on a stream, per launch: a step launched kernel by kernel
//               from the host (the host's launch rate).
#include "cuda_util.hpp"
#include "gpu_model.hpp"

namespace rafter::probes::cuda {
namespace {

__global__ void empty_kernel() {}

constexpr int kBackToBack = 256;   // launches per sample of the back-to-back forms
constexpr int kOperatorForm = 32;  // (flush, event, kernel, event) groups per graph, as op_timer's largest

void launch_empty(void* stream) {
  empty_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>();
  check_launch("empty_kernel");
}

Ceiling launch_ceiling(const Device& device, const std::string& operation, const gpu::GpuTiming& t,
                       nlohmann::json params) {
  Ceiling c;
  c.kind = CeilingKind::Latency;
  c.device = device.id;
  c.resource = "launch";
  c.operation = operation;
  c.isa = "cuda";
  c.scope = "device";
  c.threads = 1;
  c.figure = Figure::measured(t.seconds, "s");
  c.probe = "cuda.launch";
  c.clocks = t.clocks;
  c.frequency_hz = loaded_sm_hz(t.clocks);
  c.params = std::move(params);
  attach_datasheet(c, std::nullopt);
  return c;
}

void run_launch_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  check(cudaSetDevice(dev), "cudaSetDevice");
  RepeatPolicy policy = options.quick ? RepeatPolicy::quick() : options.policy;
  gpu::read_flush_prepare(dev);
  gpu::GpuTiming op;
  if (gpu::time_each_launch(launch_empty, [dev](void* s) { gpu::read_flush(dev, s); }, kOperatorForm, policy, dev, op))
    profile.ceilings.push_back(launch_ceiling(
        device, "operator", op,
        {{"method", "empty kernel timed as rafter times operators: CUDA graph of " + std::to_string(kOperatorForm) +
                        " x (L2 read-flush, event, kernel, event), each event pair a sample"},
         {"floor_of", "every GPU operator time rafter records"}}));
  else
    profile.conditions["cuda.launch." + device.id + ".operator"] = "the launches could not be captured in a graph";

  gpu::GpuTimingOptions t = timing_options(options, device, false);
  t.launches_per_sample = kBackToBack;
  t.use_graph = true;
  const gpu::GpuTiming graph = gpu::time_launches(launch_empty, t);
  if (graph.graph_used)
    profile.ceilings.push_back(launch_ceiling(
        device, "graph_node", graph,
        {{"method", std::to_string(kBackToBack) + " empty kernels as back-to-back nodes of one CUDA graph, per node"},
         {"floor_of", "a step captured as one CUDA graph, per kernel"}}));
  t.use_graph = false;
  const gpu::GpuTiming stream = gpu::time_launches(launch_empty, t);
  profile.ceilings.push_back(launch_ceiling(
      device, "stream", stream,
      {{"method", std::to_string(kBackToBack) + " empty kernels launched back to back on one stream, per launch"},
       {"floor_of", "a step launched kernel by kernel from the host, per kernel"}}));
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.launch", "cuda",
                      "launch floor: an empty kernel timed as operators are, as graph nodes and as stream launches",
                      run_launch_probe);

}  // namespace rafter::probes::cuda
