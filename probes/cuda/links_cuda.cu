// cuda.links: host<->device copies (pinned and pageable, each way and both at once), device-to-
// device copy, and peer-to-peer copies between GPUs where there are several: each way, both at once
// and the time of an 8-byte copy, the link named from NVML (NVLink direct or through NVSwitches, or
// PCIe and the level joining the two). Bytes per launch: the buffer size per direction (both
// directions: twice it; device-to-device: read + written).
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

// Two copies at once, as one launch to the timing: `first` on the timed stream, `second` on a stream
// of its own that forks from it and joins back (timed as stream launches, like the host pair).
class BothWays {
 public:
  // `other_device` >= 0: the second copy's stream (and the event it records) on that GPU, so that
  // each GPU drives the copy that leaves it (a peer pair: both copy engines busy, not one GPU's).
  explicit BothWays(int other_device = -1) : other_device_(other_device) {
    int current = 0;
    check(cudaGetDevice(&current), "cudaGetDevice");
    check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate");
    if (other_device >= 0) check(cudaSetDevice(other_device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&other_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaSetDevice(current), "cudaSetDevice");
  }
  ~BothWays() {
    cudaEventDestroy(fork_);
    cudaEventDestroy(join_);
    cudaStreamDestroy(other_);
  }
  BothWays(const BothWays&) = delete;
  BothWays& operator=(const BothWays&) = delete;
  gpu::LaunchFn launch(gpu::LaunchFn first, gpu::LaunchFn second) {
    return [this, first, second](void* s) {
      check(cudaEventRecord(fork_, cudaStream_t(s)), "cudaEventRecord");
      check(cudaStreamWaitEvent(other_, fork_), "cudaStreamWaitEvent");
      first(s);
      int current = 0;
      check(cudaGetDevice(&current), "cudaGetDevice");
      if (other_device_ >= 0) check(cudaSetDevice(other_device_), "cudaSetDevice");
      second(other_);
      check(cudaEventRecord(join_, other_), "cudaEventRecord");
      check(cudaSetDevice(current), "cudaSetDevice");
      check(cudaStreamWaitEvent(cudaStream_t(s), join_), "cudaStreamWaitEvent");
    };
  }

 private:
  int other_device_;
  cudaStream_t other_;
  cudaEvent_t fork_, join_;
};

struct Link {
  const char* operation;
  double bytes_per_launch;
  gpu::LaunchFn launch;
  bool graph;
  bool both_ways = false;  // the datasheet of one direction counts twice
};

// The device's own PCIe link, one direction (NVML's generation and width), if known.
std::optional<Datasheet> device_pcie_datasheet(const Device& device) {
  const auto& props = device.properties;
  if (!props.contains("pcie_link_generation") || !props.contains("pcie_link_width")) return std::nullopt;
  return pcie_datasheet(props["pcie_link_generation"].get<int>(), props["pcie_link_width"].get<int>());
}

// The link's launches timed: a bandwidth (bytes per launch over its time), or with `latency` the
// time of one launch.
Ceiling time_link(const ProbeOptions& options, const Device& device, const Link& l,
                  const std::string& resource, nlohmann::json params, bool latency = false) {
  auto t = timing_options(options, device, false);
  t.use_graph = l.graph;  // pageable copies cannot be captured
  Measurement m{CeilingKind::Link, resource, l.operation, "cudaMemcpyAsync", l.bytes_per_launch, "B/s", {}};
  m.timing = gpu::time_launches(l.launch, t);
  Ceiling c = make_ceiling(device, "cuda.links", m, std::move(params));
  if (latency) {
    c.kind = CeilingKind::Latency;
    c.figure = Figure::measured(m.timing.seconds, "s");
  }
  return c;
}

void add(const ProbeOptions& options, const Device& device, const Link& l, const std::string& resource,
         nlohmann::json params, std::optional<Datasheet> one_way, MachineProfile& profile) {
  Ceiling c = time_link(options, device, l, resource, std::move(params));
  if (one_way && l.both_ways) {
    one_way->value *= 2;
    one_way->basis += ", both directions";
  }
  attach_datasheet(c, one_way);
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
  BothWays both;  // the device-to-host copy reads d2
  std::vector<Link> links = {
      {"h2d_pinned", b, [&](void* s) { copy(d1.get(), h1.ptr, bytes, cudaMemcpyHostToDevice, s); }, true},
      {"d2h_pinned", b, [&](void* s) { copy(h2.ptr, d1.get(), bytes, cudaMemcpyDeviceToHost, s); }, true},
      {"bidirectional_pinned", 2 * b,
       both.launch([&](void* s) { copy(d1.get(), h1.ptr, bytes, cudaMemcpyHostToDevice, s); },
                   [&](void* s) { copy(h2.ptr, d2.get(), bytes, cudaMemcpyDeviceToHost, s); }),
       false, true},
      {"h2d_pageable", b, [&](void* s) { copy(d1.get(), p1.get(), bytes, cudaMemcpyHostToDevice, s); },
       false},
      {"d2h_pageable", b, [&](void* s) { copy(p2.get(), d1.get(), bytes, cudaMemcpyDeviceToHost, s); },
       false},
      {"d2d", 2 * b, [&](void* s) { copy(d2.get(), d1.get(), bytes, cudaMemcpyDeviceToDevice, s); }, true},
  };
  for (const Link& l : links) {
    const bool d2d = l.operation == std::string("d2d");
    add(options, device, l, d2d ? "device" : "pcie", {{"buffer_bytes", b}},
        d2d ? std::nullopt : device_pcie_datasheet(device), profile);
  }
}

// A peer's link as rafter names it, with NVML's facts, and its datasheet for one direction.
struct PeerLink {
  nlohmann::json params;
  std::optional<Datasheet> one_way;
};

PeerLink peer_link(const Device& device, int dev, int peer) {
  const nlohmann::json facts = gpu::nvml_peer_link(dev, peer);
  const PeerLinkName name = name_peer_link(facts);
  PeerLink p;
  p.params = {
      {"peer", "cuda:" + std::to_string(peer)},
      {"link", {{"kind", name.kind}, {"via", name.via}, {"version", name.version}, {"links", name.links}}},
      {"nvml", facts}};
  if (name.kind == "nvlink") {
    const std::string cc = device.properties.value("compute_capability", "0");
    p.one_way = nvlink_datasheet(std::atoi(cc.c_str()), name.links);
  } else if (name.kind == "pcie") {
    p.one_way = device_pcie_datasheet(device);
  }
  return p;
}

void peer_links(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  const int n = gpu::device_count();
  const std::size_t bytes = options.quick ? (64u << 20) : (256u << 20);
  constexpr std::size_t kSmall = 8;  // the copy whose time is the link's latency
  for (int peer = 0; peer < n; ++peer) {
    if (peer == dev) continue;
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, dev, peer), "cudaDeviceCanAccessPeer");
    if (!can) {
      profile.conditions["cuda.links." + device.id + ".p2p_cuda:" + std::to_string(peer)] = "no peer access";
      continue;
    }
    auto enable = [](int from, int to) {  // `from` may address `to`'s memory
      check(cudaSetDevice(from), "cudaSetDevice");
      const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
      if (e != cudaErrorPeerAccessAlreadyEnabled) check(e, "cudaDeviceEnablePeerAccess");
      cudaGetLastError();
    };
    enable(peer, dev);  // the peer pushes into this GPU in the both-ways pair
    DeviceBuffer remote(bytes), remote_src(bytes);
    fill_random(remote_src.get(), bytes, 11u);
    enable(dev, peer);
    DeviceBuffer local(bytes), local_dst(bytes);
    fill_random(local.get(), bytes, 9u);
    auto to_peer = [&](std::size_t n_bytes, void* s) {
      check(cudaMemcpyPeerAsync(remote.get(), peer, local.get(), dev, n_bytes, cudaStream_t(s)),
            "cudaMemcpyPeerAsync");
    };
    auto from_peer = [&](void* s) {
      check(cudaMemcpyPeerAsync(local_dst.get(), dev, remote_src.get(), peer, bytes, cudaStream_t(s)),
            "cudaMemcpyPeerAsync");
    };
    BothWays both(peer);  // this GPU pushes to the peer while the peer pushes back
    const std::string resource = "p2p_cuda:" + std::to_string(peer);
    const PeerLink link = peer_link(device, dev, peer);
    nlohmann::json params = link.params;
    params["buffer_bytes"] = double(bytes);
    const double b = double(bytes);
    for (const Link& l : std::vector<Link>{
             {"p2p_write", b, [&](void* s) { to_peer(bytes, s); }, true},
             {"p2p_read", b, from_peer, true},
             {"p2p_bidirectional", 2 * b, both.launch([&](void* s) { to_peer(bytes, s); }, from_peer), false,
              true}})  // from_peer on the peer's stream
      add(options, device, l, resource, params, link.one_way, profile);
    // Latency: 8-byte copies back to back on one stream (each waits for the one before), per copy.
    const Link small{"p2p_write", double(kSmall), [&](void* s) { to_peer(kSmall, s); }, true};
    nlohmann::json lat_params = link.params;
    lat_params["bytes"] = double(kSmall);
    Ceiling c = time_link(options, device, small, resource, std::move(lat_params), true);
    attach_datasheet(c, std::nullopt);
    profile.ceilings.push_back(std::move(c));
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
