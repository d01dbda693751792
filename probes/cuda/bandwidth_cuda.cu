// cuda.bandwidth: read, write and copy bandwidth per memory level. A sweep over working sets from
// 16 KiB to at least 4x the L2 (kernels in bandwidth_kernels.cuh) shows L1, L2 and HBM as
// plateaus, found inside windows named from the device properties (gpu_model.hpp); streaming
// kernels over 2 GiB buffers give the HBM ceilings. The copy is checked element for element.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bandwidth_kernels.cuh"
#include "cuda_util.hpp"
#include "gpu_model.hpp"

namespace rafter::probes::cuda {
namespace {

// Read-only, write-only, 1:1 (copy) and 2:1 (triad: c = a ^ b) mixes: an operator is judged on the
// roof of its own read:write mix (roofline/roofs.cpp).
enum class SweepOp { Read, Write, Copy, Triad };
const char* name(SweepOp op) {
  switch (op) {
    case SweepOp::Read: return "read";
    case SweepOp::Write: return "write";
    case SweepOp::Copy: return "copy";
    case SweepOp::Triad: return "triad";
  }
  return "";
}
// Buffers an op touches: bytes counted per vector it streams.
int streams_of(SweepOp op) { return op == SweepOp::Copy ? 2 : op == SweepOp::Triad ? 3 : 1; }

struct Context {
  const ProbeOptions& options;
  const Device& device;
  cudaDeviceProp props{};
  DeviceBuffer* a = nullptr;
  DeviceBuffer* b = nullptr;
  DeviceBuffer* c = nullptr;
  DeviceBuffer* sink = nullptr;
};

double pow2_at_least(double x) { return std::exp2(std::ceil(std::log2(x))); }

// Launch shapes of the device read sweep: vectors in flight per thread, threads per block,
// blocks per SM. The point keeps the fastest. Measured on the H100 (L2, 4-16 MiB): 8 vectors in
// 4 blocks of 256 read 9.0-9.5 TB/s where 4 vectors in 2 blocks of 1024 read 7.8-8.2.
struct ReadShape {
  int unroll, threads, blocks_per_sm;
};
constexpr ReadShape kReadShapes[] = {{kUnroll, kSweepThreads, 2}, {8, 256, 4}, {8, 128, 8}};

void launch_read(const ReadShape& r, int sms, const int4* a, unsigned mask, int trips, int* sink,
                 cudaStream_t st) {
  const int blocks = r.blocks_per_sm * sms;
  if (r.unroll == kUnroll)
    grid_read<kUnroll, kSweepThreads><<<blocks, kSweepThreads, 0, st>>>(a, mask, trips, sink);
  else if (r.threads == 256)
    grid_read<8, 256><<<blocks, 256, 0, st>>>(a, mask, trips, sink);
  else
    grid_read<8, 128><<<blocks, 128, 0, st>>>(a, mask, trips, sink);
}

// One point of a sweep: `l1` selects the L1 sweep (read only), else the device sweep of `op`.
SweepPoint sweep_point(Context& cx, SweepOp op, bool l1, double ws_bytes,
                       const ReadShape& shape = kReadShapes[0]) {
  const int sms = cx.props.multiProcessorCount;
  const bool shaped = !l1 && op == SweepOp::Read;
  const int blocks = shaped ? shape.blocks_per_sm * sms : 2 * sms;
  const double threads = double(blocks) * (shaped ? shape.threads : kSweepThreads);
  // Copy and triad split the working set between their buffers (triad: a power of two per buffer,
  // so 3/4 of the working set: the point is placed at the bytes it really covers).
  const double per_buffer = op == SweepOp::Copy    ? ws_bytes / 2
                            : op == SweepOp::Triad ? ws_bytes / 4
                                                   : ws_bytes;
  const auto mask = static_cast<unsigned>(per_buffer / 16) - 1;
  const int unroll = shaped                                          ? shape.unroll
                     : (op == SweepOp::Copy || op == SweepOp::Triad) ? kCopyUnroll
                                                                     : kUnroll;
  const double bytes_per_trip = threads * unroll * 16;
  const double target_bytes = cx.options.quick ? 2e9 : 8e9;
  // The L1 sweep's blocks each walk the whole working set; the device sweep's grid covers it.
  const double cover = l1 ? per_buffer / (kSweepThreads * unroll * 16.0) : per_buffer / bytes_per_trip;
  auto trips = int(std::max(std::ceil(cover), std::round(target_bytes / bytes_per_trip)));
  trips = std::max(trips, 1);
  auto* a = cx.a->get<int4>();
  auto* b = cx.b->get<int4>();
  auto* c = cx.c->get<int4>();
  int* sink = cx.sink->get<int>();
  Measurement m;
  m.work_per_launch = bytes_per_trip * double(trips) * streams_of(op);
  m.timing = gpu::time_launches(
      [&](void* s) {
        auto st = cudaStream_t(s);
        if (l1)
          sweep_l1_read<<<blocks, kSweepThreads, 0, st>>>(a, mask, trips, sink);
        else if (op == SweepOp::Read)
          launch_read(shape, sms, a, mask, trips, sink, st);
        else if (op == SweepOp::Write)
          grid_write<<<blocks, kSweepThreads, 0, st>>>(b, mask, trips);
        else if (op == SweepOp::Copy)
          grid_copy<<<blocks, kSweepThreads, 0, st>>>(a, b, mask, trips);
        else
          grid_triad<<<blocks, kSweepThreads, 0, st>>>(a, b, c, mask, trips);
        check_launch("sweep kernel");
      },
      timing_options(cx.options, cx.device, false));
  double work = m.work_per_launch;
  SweepPoint p;
  p.working_set_bytes = op == SweepOp::Triad ? 3 * per_buffer : ws_bytes;
  p.figure = Figure::measured(transform(m.timing.seconds, [work](double sec) { return work / sec; }), "B/s");
  return p;
}

// The device read sweep's point: the fastest launch shape.
SweepPoint best_point(Context& cx, SweepOp op, bool l1, double ws_bytes) {
  if (l1 || op != SweepOp::Read) return sweep_point(cx, op, l1, ws_bytes);
  SweepPoint best;
  for (const ReadShape& shape : kReadShapes) {
    SweepPoint p = sweep_point(cx, op, l1, ws_bytes, shape);
    if (p.figure.value > best.figure.value) best = p;
  }
  return best;
}

std::optional<Datasheet> level_datasheet(const Context& cx, const std::string& level, double sm_hz,
                                         double mem_hz) {
  if (level == "L1") {
    Datasheet d = shared_memory_datasheet(cx.props.multiProcessorCount, sm_hz);
    d.basis = "L1/shared SRAM data path, " + d.basis;
    return d;
  }
  if (level == "HBM" || level == "DRAM") return device_memory_datasheet(mem_hz, cx.props.memoryBusWidth);
  return std::nullopt;  // NVIDIA publishes no L2 bandwidth
}

void sweep(Context& cx, SweepOp op, bool l1, double max_ws, MachineProfile& profile) {
  Sweep sw;
  sw.device = cx.device.id;
  sw.probe = l1 ? "bandwidth_l1" : "bandwidth";
  sw.operation = name(op);
  sw.isa = l1 ? "ld.global.nc.v4" : op == SweepOp::Write ? "st.global.v4" : "ld.global.cg.v4";
  sw.threads = 2 * cx.props.multiProcessorCount * kSweepThreads;
  const int dev = device_index(cx.device);
  gpu::Clocks before = gpu::read_clocks(dev);
  // --quick steps by 4 inside the caches but by 2 from the L2's size on, so that the sweep still
  // shows several points past the L2.
  const double l2 = cx.props.l2CacheSize;
  for (double ws = 16384; ws <= max_ws; ws *= (cx.options.quick && ws < l2) ? 4 : 2)
    sw.points.push_back(best_point(cx, op, l1, ws));
  gpu::Clocks after = gpu::read_clocks(dev);
  ClockState clocks{before.sm_hz, after.sm_hz, before.memory_hz, after.memory_hz, after.sm_hz < 0.95 * before.sm_hz};
  const std::vector<MemoryLevel>& levels = cx.device.memory_levels;
  for (const auto& level : levels) {
    // The L1 sweep gives L1 only; the device sweep L2 and beyond (L1 is write-through, and its
    // loads bypass L1).
    if (level.name == "shared" || (level.name == "L1") != l1) continue;
    // The L2 is not LRU: a sweep cycling over several times its size still hits (measured on an
    // H100: reads over 128 MiB at 3.9 TB/s, 256 MiB at 3.35, above the 3.35 TB/s datasheet's
    // reach; three streams of a triad sweep over 3 x 128 MiB 3.36, the 4 GiB triad stream 3.07), and
    // from 4x to 16x its size still by call: one read sweep's plateau read 4.55-4.91 TB/s on the H200
    // from call to call, up to 102 % of its 4.8 TB/s datasheet, where the read streams, each byte
    // once a launch, read 4.57-4.65. The outermost level's roofs come from the streams alone; its
    // sweep points stay in the sweep.
    if (&level == &levels.back()) continue;
    auto window = plateau_window(levels, level.name);
    if (!window) continue;
    // Below a quarter of the bytes one trip of the grid requests (17 MB on the H100), requests for
    // the same line overlap in flight and do not each reach the L2 (read sweeps on the H100:
    // 512 KiB "20 TB/s", beyond any L2; 4 MiB 11.0, 8 MiB 10.3, 16 MiB 9.0): the plateau starts above.
    if (!l1)
      window->low_bytes =
          std::max(window->low_bytes, 2.0 * cx.props.multiProcessorCount * kSweepThreads * kUnroll * 16 / 4);
    auto plateau = find_plateau(sw.points, *window);
    if (!plateau) continue;
    Ceiling c;
    c.kind = CeilingKind::Bandwidth;
    c.device = cx.device.id;
    c.resource = level.name;
    c.operation = name(op);
    c.isa = "sweep";
    c.scope = "device";
    c.threads = sw.threads;
    c.figure = plateau->point.figure;
    c.clocks = clocks;
    c.frequency_hz = clocks.core_hz_after;
    c.probe = "cuda.bandwidth";
    c.params = {{"working_set_bytes", plateau->point.working_set_bytes}, {"sweep_isa", sw.isa},
                {"plateau_points", plateau->points}, {"plateau_spread", plateau->spread},
                {"window_bytes", {window->low_bytes, std::min(window->high_bytes, max_ws)}},
                {"access", l1 ? "16-byte vectors, every block walks the working set through L1"
                              : "16-byte vectors, the grid strides over the working set, L2-only loads"}};
    if (!l1 && op == SweepOp::Read)
      c.params["launch_shapes"] =
          "fastest per point of: 4 vectors a thread in 2 blocks of 1024 per SM, "
          "8 in 4 of 256, 8 in 8 of 128";
    attach_datasheet(c, level_datasheet(cx, level.name, c.frequency_hz, clocks.memory_hz_after));
    profile.ceilings.push_back(std::move(c));
  }
  profile.sweeps.push_back(std::move(sw));
}

// Vectors where out != a (b == nullptr: copy) or out != a ^ b (triad).
__global__ void count_mismatches(const int4* a, const int4* b, const int4* out, std::size_t n, unsigned long long* bad) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    int4 x = a[i], y = out[i];
    if (b) xor_into(x, b[i]);
    if (x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w) atomicAdd(bad, 1ULL);
  }
}

// The stream variants: grid-stride plain or with streaming hints; one pass with 1, 2, 4 or 8
// vectors a thread in blocks of 256, 1, 2 or 4 in blocks of 128, 1 in blocks of 512. The HBM
// ceiling is the best of them.
enum class Variant {
  Stride,
  StrideHints,
  OnePass1,
  OnePass2,
  OnePass4,
  OnePass8,
  OnePass1Small,
  OnePass2Small,
  OnePass4Small,
  OnePass1Large
};
const char* name(Variant v) {
  switch (v) {
    case Variant::Stride: return "grid_stride";
    case Variant::StrideHints: return "grid_stride_streaming_hints";
    case Variant::OnePass1: return "one_pass_1";
    case Variant::OnePass2: return "one_pass_2";
    case Variant::OnePass1Small:
      return "one_pass_1_block_128";
    case Variant::OnePass2Small: return "one_pass_2_block_128";
    case Variant::OnePass4: return "one_pass_4";
    case Variant::OnePass8: return "one_pass_8";
    case Variant::OnePass4Small: return "one_pass_4_block_128";
    case Variant::OnePass1Large:
      return "one_pass_1_block_512";
  }
  return "";
}

struct StreamBuffers {
  int4 *a, *b, *c;
  int* sink;
};

template <int U, int B = 256>
void launch_onepass(SweepOp op, const StreamBuffers& x, std::size_t n16, cudaStream_t s) {
  const auto grid = unsigned(n16 / (B * U));
  if (op == SweepOp::Read) onepass_read<U, B><<<grid, B, 0, s>>>(x.a, x.sink);
  if (op == SweepOp::Write) onepass_write<U, B><<<grid, B, 0, s>>>(x.b);
  if (op == SweepOp::Copy) onepass_copy<U, B><<<grid, B, 0, s>>>(x.a, x.b);
  if (op == SweepOp::Triad) onepass_triad<U, B><<<grid, B, 0, s>>>(x.a, x.b, x.c);
}

template <bool kHints>
void launch_stride(SweepOp op, int blocks, const StreamBuffers& x, std::size_t n16, cudaStream_t s) {
  if (op == SweepOp::Read) stream_read<kHints><<<blocks, 256, 0, s>>>(x.a, n16, x.sink);
  if (op == SweepOp::Write) stream_write<kHints><<<blocks, 256, 0, s>>>(x.b, n16);
  if (op == SweepOp::Copy) stream_copy<kHints><<<blocks, 256, 0, s>>>(x.a, x.b, n16);
  if (op == SweepOp::Triad) stream_triad<kHints><<<blocks, 256, 0, s>>>(x.a, x.b, x.c, n16);
}

void launch_stream(Variant v, SweepOp op, int blocks, const StreamBuffers& x, std::size_t n16, cudaStream_t s) {
  if (v == Variant::OnePass1) launch_onepass<1>(op, x, n16, s);
  if (v == Variant::OnePass1Small) launch_onepass<1, 128>(op, x, n16, s);
  if (v == Variant::OnePass1Large) launch_onepass<1, 512>(op, x, n16, s);
  if (v == Variant::OnePass2) launch_onepass<2>(op, x, n16, s);
  if (v == Variant::OnePass2Small) launch_onepass<2, 128>(op, x, n16, s);
  if (v == Variant::OnePass4) launch_onepass<4>(op, x, n16, s);
  if (v == Variant::OnePass4Small) launch_onepass<4, 128>(op, x, n16, s);
  if (v == Variant::OnePass8) launch_onepass<8>(op, x, n16, s);
  if (v == Variant::Stride) launch_stride<false>(op, blocks, x, n16, s);
  if (v == Variant::StrideHints) launch_stride<true>(op, blocks, x, n16, s);
  check_launch("stream kernel");
}

// Poisons the destination, copies (or triads) once with variant `v`, counts the vectors that differ.
unsigned long long output_mismatches(Variant v, SweepOp op, int blocks, const StreamBuffers& x, std::size_t n16) {
  DeviceBuffer bad(8);
  int4* out = op == SweepOp::Copy ? x.b : x.c;
  check(cudaMemset(out, 0xFF, n16 * 16), "poison the destination");
  check(cudaMemset(bad.get(), 0, 8), "clear mismatch count");
  launch_stream(v, op, blocks, x, n16, nullptr);
  count_mismatches<<<4 * blocks, 256>>>(x.a, op == SweepOp::Triad ? x.b : nullptr, out, n16,
                                        bad.get<unsigned long long>());
  check_launch("count_mismatches");
  unsigned long long mismatches = 0;
  check(cudaMemcpy(&mismatches, bad.get(), 8, cudaMemcpyDeviceToHost), "copy mismatch count");
  return mismatches;
}

// Checks a copy or triad (poison, run once, compare), then adds the stream ceiling.
void add_stream_ceiling(Context& cx, SweepOp op, const Measurement& best, Variant v, int blocks,
                        const StreamBuffers& x, std::size_t n16, nlohmann::json params,
                        MachineProfile& profile) {
  if (op == SweepOp::Copy || op == SweepOp::Triad) {  // it must have computed
    unsigned long long bad = output_mismatches(v, op, blocks, x, n16);
    params["check"] = {{"pass", bad == 0}, {"mismatched_vectors", bad}};
  }
  Ceiling c = make_ceiling(cx.device, "cuda.bandwidth", best, params);
  attach_datasheet(c, device_memory_datasheet(c.clocks.memory_hz_after, cx.props.memoryBusWidth));
  if (params.contains("check") && !params["check"]["pass"].get<bool>()) c.flag = "check_failed";
  profile.ceilings.push_back(std::move(c));
}

const char* bytes_counted(SweepOp op) {
  return op == SweepOp::Copy ? "read + written" : op == SweepOp::Triad ? "2 read + 1 written" : name(op);
}

constexpr Variant kVariants[] = {Variant::Stride,        Variant::StrideHints,   Variant::OnePass1,
                                 Variant::OnePass2,      Variant::OnePass4,      Variant::OnePass8,
                                 Variant::OnePass1Small, Variant::OnePass2Small, Variant::OnePass4Small,
                                 Variant::OnePass1Large};

// A stream ceiling's measurement before timing: `n16` vectors a stream.
Measurement stream_measurement(const Context& cx, SweepOp op, const char* isa, std::size_t n16) {
  Measurement m;
  m.kind = CeilingKind::Bandwidth;
  m.resource = cx.device.memory_levels.back().name;
  m.operation = name(op);
  m.isa = isa;
  m.unit = "B/s";
  m.work_per_launch = double(n16) * 16 * streams_of(op);
  return m;
}

// Every launch of variant `v` timed as rafter times operators (L2 read-flush, event, kernel, event);
// false when the launches cannot be captured.
bool time_as_operator(const Context& cx, Variant v, SweepOp op, int blocks, const StreamBuffers& x,
                      std::size_t n16, gpu::GpuTiming& out) {
  const int dev = device_index(cx.device);
  return gpu::time_each_launch([&](void* s) { launch_stream(v, op, blocks, x, n16, cudaStream_t(s)); },
                               [dev](void* s) { gpu::read_flush(dev, s); }, 8,
                               timing_options(cx.options, cx.device, true).policy, dev, out);
}

// The roof of operators smaller than the operator-sized streams: 32 MiB a stream (a 4096 x 4096
// BF16 tensor, Llama-2 7B's hidden state at 4096 tokens), each launch timed as operators are. The
// L2 holds a larger share of such an operator's written lines when its stop event fires (measured
// on the H100: the 7B prefill step's residual add, 3 x 32 MiB, at 104 % of the 128 MiB streams'
// 2:1 roof). Kept apart from the HBM roof (params.small_operators_below_bytes: the roofline judges
// only records moving fewer bytes than the operator-sized streams on it; MachineProfile::best
// never returns it).
void small_operator_stream(Context& cx, SweepOp op, const StreamBuffers& x, std::size_t n16_op,
                           MachineProfile& profile) {
  // 2^21 vectors: a multiple of every one-pass variant's block, and of the grid-stride variants'
  // trip with a power-of-two grid of about 4 blocks per SM.
  const std::size_t n16 = std::size_t(32u << 20) / 16;
  int blocks = 1;
  while (2 * blocks <= 4 * cx.props.multiProcessorCount &&
         n16 % (std::size_t(2 * blocks) * 256 * kUnroll) == 0)
    blocks *= 2;
  if (n16 >= n16_op) return;
  nlohmann::json tried = nlohmann::json::object();
  Measurement best;
  Variant best_variant = Variant::Stride;
  for (Variant v : kVariants) {
    Measurement m = stream_measurement(cx, op, "stream_small_operator", n16);
    if (!time_as_operator(cx, v, op, blocks, x, n16, m.timing)) return;
    tried[name(v)] = m.work_per_launch / m.timing.seconds.median;
    if (best.work_per_launch == 0 || m.timing.seconds.median < best.timing.seconds.median) {
      best = m;
      best_variant = v;
    }
  }
  nlohmann::json params = {{"buffer_bytes", double(n16) * 16},
                           {"variant", name(best_variant)},
                           {"form", "small operator-sized buffers, each launch timed as operators are"},
                           {"rate_by_variant", tried},
                           {"small_operators_below_bytes", double(n16_op) * 16 * streams_of(op)},
                           {"bytes_counted", bytes_counted(op)}};
  add_stream_ceiling(cx, op, best, best_variant, blocks, x, n16, params, profile);
}

// HBM ceilings: the best variant, each on buffers of `bytes` far larger than L2.
void stream(Context& cx, SweepOp op, double bytes, MachineProfile& profile) {
  const int blocks = 8 * cx.props.multiProcessorCount;
  const std::size_t chunk = std::size_t(blocks) * 256 * kUnroll * 8;  // also a multiple of 256 x 8
  const std::size_t n16 = std::size_t(bytes / 16) / chunk * chunk;
  const StreamBuffers x{cx.a->get<int4>(), cx.b->get<int4>(), cx.c->get<int4>(), cx.sink->get<int>()};
  // Operator-sized buffers (about 128 MiB a stream, a 16384 x 4096 BF16 tensor; a whole number of
  // grid chunks: 132 MiB on the H100), each launch timed as
  // rafter times operators (L2 read-flush, event, kernel, event): part of the last written lines is
  // still in L2 when the kernel ends and is written back after its stop event, for the roof as for
  // any operator so timed (measured on the H100: PyTorch's 2:1 residual add at 3.14 TB/s so timed,
  // above the 3.07 of a 4 GiB triad stream). The ceiling is the best of both forms. Not for
  // write-only streams: there the lines left in L2 are a third of the stream, and the figure would
  // say nothing of HBM.
  //
  // Operators move more than that (Llama-2 7B's SwiGLU at 16384 tokens: 361 MB a stream), and so
  // timed a stream reads faster as it grows, the launch's ramp a smaller part of it: measured on the
  // H200, a 2:1 stream at 4.376 TB/s with 138 MB a stream and 4.404 with 361 MB, where PyTorch's and
  // rafter's SwiGLU forward read 4.410–4.418, above the 128 MiB form's roof. So the operator-sized
  // form is timed at 128, 256 and 512 MiB a stream (as far as the buffers hold), the best taken.
  const std::size_t n16_op = std::min(n16, std::max(chunk, std::size_t(128u << 20) / 16 / chunk * chunk));
  const std::vector<std::size_t> op_sizes = operator_sized_streams(n16_op, cx.a->bytes() / 16, 3);
  const int dev = device_index(cx.device);
  gpu::read_flush_prepare(dev);
  nlohmann::json tried = nlohmann::json::object(), tried_op = nlohmann::json::object();
  Measurement best;
  Variant best_variant = Variant::Stride;
  std::size_t best_n16 = n16;
  bool best_as_operator = false;
  auto consider = [&](const Measurement& m, Variant v, std::size_t n, bool as_operator) {
    if (best.work_per_launch == 0 ||
        m.work_per_launch / m.timing.seconds.median > best.work_per_launch / best.timing.seconds.median) {
      best = m;
      best_variant = v;
      best_n16 = n;
      best_as_operator = as_operator;
    }
  };
  for (Variant v : kVariants) {
    Measurement m = stream_measurement(cx, op, "stream", n16);
    m.timing = gpu::time_launches([&](void* s) { launch_stream(v, op, blocks, x, n16, cudaStream_t(s)); },
                                  timing_options(cx.options, cx.device, true));
    tried[name(v)] = m.work_per_launch / m.timing.seconds.median;
    consider(m, v, n16, false);
    // A fresh measurement: --counters counted the large-buffer launch, not this one.
    for (std::size_t n : op_sizes) {
      Measurement sized = stream_measurement(cx, op, "stream_operator_sized", n);
      if (op != SweepOp::Write && time_as_operator(cx, v, op, blocks, x, n, sized.timing)) {
        tried_op[std::to_string(n * 16 >> 20) + " MiB"][name(v)] =
            sized.work_per_launch / sized.timing.seconds.median;
        consider(sized, v, n, true);
      }
    }
  }
  nlohmann::json params = {
      {"buffer_bytes", double(best_n16) * 16},
      {"variant", name(best_variant)},
      {"form", best_as_operator ? "operator-sized buffers, each launch timed as operators are"
                                : "large buffers, back-to-back launches"},
      {"rate_by_variant", tried},
      {"rate_by_variant_operator_sized", tried_op},  // by bytes a stream, then variant
      {"operator_sized_buffer_bytes", double(n16_op) * 16},
      {"bytes_counted", bytes_counted(op)}};
  add_stream_ceiling(cx, op, best, best_variant, blocks, x, best_n16, params, profile);
  if (op != SweepOp::Write) small_operator_stream(cx, op, x, n16_op, profile);
}

void run_bandwidth_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  Context cx{options, device};
  const int dev = device_index(device);
  check(cudaSetDevice(dev), "cudaSetDevice");
  check(cudaGetDeviceProperties(&cx.props, dev), "cudaGetDeviceProperties");
  // Global loads may then use the whole unified SRAM as L1.
  check(cudaFuncSetAttribute(sweep_l1_read, cudaFuncAttributePreferredSharedMemoryCarveout, 0), "carveout");
  const double l2 = cx.props.l2CacheSize;
  double max_ws = options.max_working_set_bytes > 0 ? options.max_working_set_bytes : 4 * l2;
  max_ws = pow2_at_least(std::max(max_ws, 16 * l2));  // HBM plateau: points from 4x to 16x the L2
  // As large as PyTorch's reference copy (4 GiB each way), within an eighth of the GPU's memory.
  const double stream_bytes = std::min(options.quick ? 512.0 * (1 << 20) : 4096.0 * (1 << 20),
                                       pow2_at_least(double(cx.props.totalGlobalMem) / 16));
  const double buffer_bytes = std::max(max_ws, stream_bytes);
  const auto buffer_size = static_cast<std::size_t>(buffer_bytes);
  DeviceBuffer a(buffer_size), b(buffer_size), c(buffer_size), sink(64);
  fill_random(a.get(), a.bytes(), 3u);
  fill_random(b.get(), b.bytes(), 4u);
  fill_random(c.get(), c.bytes(), 5u);
  cx.a = &a;
  cx.b = &b;
  cx.c = &c;
  cx.sink = &sink;
  sweep(cx, SweepOp::Read, true, std::min(max_ws, 4.0 * (1 << 20)), profile);  // L1, into L2
  for (SweepOp op : {SweepOp::Read, SweepOp::Write, SweepOp::Copy, SweepOp::Triad}) {
    sweep(cx, op, false, max_ws, profile);
    stream(cx, op, stream_bytes, profile);
  }
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.bandwidth", "cuda",
                      "L1, L2 and HBM bandwidth per read:write mix (read, write, copy 1:1, triad 2:1): sweeps and streams",
                      run_bandwidth_probe);

}  // namespace rafter::probes::cuda
