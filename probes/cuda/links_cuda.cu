// cuda.links: host<->device copies (pinned and pageable, each way and both at once), device-to-
// device copy, and peer-to-peer copies between GPUs where there are several. Bytes per launch:
// the buffer size per direction (both directions: twice it; device-to-device: read + written).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cuda_util.hpp"
#include "gpu_model.hpp"

namespace rafter::probes::cuda {
namespace {

struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(std::size_t bytes) { check(cudaMallocHost(&ptr, bytes), "cudaMallocHost"); }
  ~PinnedBuffer() {
    if (ptr) cudaFreeHost(ptr);
  }
};

struct Link {
  const char* operation;
  double bytes_per_launch;
  gpu::LaunchFn launch;
  bool graph;
};

void add(const ProbeOptions& options, const Device& device, const Link& l, const std::string& resource,
         double buffer_bytes, MachineProfile& profile) {
  auto t = timing_options(options, device, false);
  t.use_graph = l.graph;  // pageable copies cannot be captured
  Measurement m{CeilingKind::Link, resource, l.operation, "cudaMemcpyAsync", l.bytes_per_launch, "B/s", {}};
  m.timing = gpu::time_launches(l.launch, t);
  Ceiling c = make_ceiling(device, "cuda.links", m, {{"buffer_bytes", buffer_bytes}});
  std::optional<Datasheet> d;
  const auto& props = device.properties;
  if (resource == "pcie" && props.contains("pcie_link_generation") && props.contains("pcie_link_width")) {
    d = pcie_datasheet(props["pcie_link_generation"].get<int>(), props["pcie_link_width"].get<int>());
    if (d && std::string(l.operation).rfind("bidirectional", 0) == 0) {
      d->value *= 2;
      d->basis += ", both directions";
    }
  }
  attach_datasheet(c, d);
  profile.ceilings.push_back(std::move(c));
}

void host_links(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const std::size_t bytes = options.quick ? (64u << 20) : (256u << 20);
  DeviceBuffer d1(bytes), d2(bytes);
  fill_random(d1.get(), bytes, 8u);
  fill_random(d2.get(), bytes, 10u);  // the reverse copy of the bidirectional pair reads it
  PinnedBuffer h1(bytes), h2(bytes);
  std::unique_ptr<char[]> p1(new char[bytes]), p2(new char[bytes]);
  std::memset(p1.get(), 0x5a, bytes);  // touch every page once, outside the timing
  std::memset(p2.get(), 0xa5, bytes);
  std::memset(h1.ptr, 0x3c, bytes);
  const double b = double(bytes);
  auto copy = [](void* dst, const void* src, std::size_t n, cudaMemcpyKind k, void* s) {
    check(cudaMemcpyAsync(dst, src, n, k, cudaStream_t(s)), "cudaMemcpyAsync");
  };
  // Both directions at once: the reverse copy on a second stream that the first waits for.
  cudaStream_t other;
  cudaEvent_t fork, join;
  check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "cudaEventCreate");
  auto both = [&](void* s) {
    check(cudaEventRecord(fork, cudaStream_t(s)), "cudaEventRecord");
    check(cudaStreamWaitEvent(other, fork), "cudaStreamWaitEvent");
    copy(d1.get(), h1.ptr, bytes, cudaMemcpyHostToDevice, s);
    check(cudaMemcpyAsync(h2.ptr, d2.get(), bytes, cudaMemcpyDeviceToHost, other), "cudaMemcpyAsync");
    check(cudaEventRecord(join, other), "cudaEventRecord");
    check(cudaStreamWaitEvent(cudaStream_t(s), join), "cudaStreamWaitEvent");
  };
  std::vector<Link> links = {
      {"h2d_pinned", b, [&](void* s) { copy(d1.get(), h1.ptr, bytes, cudaMemcpyHostToDevice, s); }, true},
      {"d2h_pinned", b, [&](void* s) { copy(h2.ptr, d1.get(), bytes, cudaMemcpyDeviceToHost, s); }, true},
      {"bidirectional_pinned", 2 * b, both, false},
      {"h2d_pageable", b, [&](void* s) { copy(d1.get(), p1.get(), bytes, cudaMemcpyHostToDevice, s); }, false},
      {"d2h_pageable", b, [&](void* s) { copy(p2.get(), d1.get(), bytes, cudaMemcpyDeviceToHost, s); }, false},
      {"d2d", 2 * b, [&](void* s) { copy(d2.get(), d1.get(), bytes, cudaMemcpyDeviceToDevice, s); }, true},
  };
  for (const Link& l : links) add(options, device, l, l.operation == std::string("d2d") ? "device" : "pcie", b, profile);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(other);
}

void peer_links(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  const int n = gpu::device_count();
  const std::size_t bytes = options.quick ? (64u << 20) : (256u << 20);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == dev) continue;
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, dev, peer), "cudaDeviceCanAccessPeer");
    if (!can) {
      profile.conditions["cuda.links." + device.id + ".p2p_cuda:" + std::to_string(peer)] = "no peer access";
      continue;
    }
    check(cudaSetDevice(peer), "cudaSetDevice");
    DeviceBuffer remote(bytes);
    check(cudaSetDevice(dev), "cudaSetDevice");
    cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e != cudaErrorPeerAccessAlreadyEnabled) check(e, "cudaDeviceEnablePeerAccess");
    cudaGetLastError();
    DeviceBuffer local(bytes);
    fill_random(local.get(), bytes, 9u);
    Link l{"p2p_write", double(bytes), [&](void* s) {
             check(cudaMemcpyPeerAsync(remote.get(), peer, local.get(), dev, bytes, cudaStream_t(s)), "cudaMemcpyPeerAsync");
           }, true};
    add(options, device, l, "p2p_cuda:" + std::to_string(peer), double(bytes), profile);
  }
}

void run_links_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  check(cudaSetDevice(device_index(device)), "cudaSetDevice");
  host_links(options, device, profile);
  peer_links(options, device, profile);
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.links", "cuda",
                      "host<->device (pinned, pageable, both ways), device-to-device and peer copies",
                      run_links_probe);

}  // namespace rafter::probes::cuda
