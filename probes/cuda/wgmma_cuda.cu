// cuda.tensor: tensor-core ceilings on Hopper through wgmma (sm_90a): BF16, FP16, TF32, FP8 E4M3
// and E5M2, INT8. Each warpgroup keeps a 64x256 accumulator in registers and issues m64n256
// wgmma on A and B tiles held in shared memory (descriptors), several warpgroups per SM, no global
// traffic in the loop: the rate is what the tensor cores do, not what a memory system feeds them.
// Bytes and FLOPs per launch: 2 x 64 x 256 x K per wgmma, 4 k-steps per iteration.
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <thread>
#include <vector>

#include "burst_window.hpp"
#include "cuda_util.hpp"
#include "gpu_model.hpp"
#include "sustained.hpp"
#include "wgmma_common.cuh"
#include "wgmma_ops.cuh"

namespace rafter::probes::cuda {
namespace {

enum class Op { BF16, FP16, TF32, E4M3, E5M2, S8 };
constexpr int kKSteps = 4;
constexpr int kMaxWarpgroups = 3;  // 3 x 128 threads x 154 registers fit one SM's register file
constexpr int kThreads = 128 * kMaxWarpgroups;
constexpr int kRowsA = 64, kRowsB = 256;
constexpr int kKBytes = kKSteps * kStepBytes;  // 128 bytes of K per row
constexpr int kSmemBytes = (kRowsA + kRowsB) * kKBytes;
constexpr int kTraceEvery = 16;  // iterations between two trace points (about 10 µs)

template <Op op>
struct Acc {
  using type = float;
};
template <>
struct Acc<Op::S8> {
  using type = int;
};

template <Op op>
__device__ __forceinline__ void mma(typename Acc<op>::type (&d)[128], std::uint64_t a, std::uint64_t b) {
  if constexpr (op == Op::BF16) wgmma::mma_bf16(d, a, b);
  if constexpr (op == Op::FP16) wgmma::mma_fp16(d, a, b);
  if constexpr (op == Op::TF32) wgmma::mma_tf32(d, a, b);
  if constexpr (op == Op::E4M3) wgmma::mma_e4m3(d, a, b);
  if constexpr (op == Op::E5M2) wgmma::mma_e5m2(d, a, b);
  if constexpr (op == Op::S8) wgmma::mma_s8(d, a, b);
}

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// a: 64 rows x 128 bytes, b: 256 rows x 128 bytes, row-major (K contiguous). Block 0 writes each
// warpgroup's 64x256 result to out[wg]; other blocks write only if a sum is impossible, to keep
// the work live. kTrace: block 0 also records its progress in `trace` (time_best_window).
template <Op op, bool kTrace = false>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_kernel(const std::uint8_t* a, const std::uint8_t* b, typename Acc<op>::type* out,
                 long long iterations, int leading_bytes, int stride_bytes, long long* cycles,
                 unsigned long long* trace = nullptr) {
  const CycleCounter counter;
  using T = typename Acc<op>::type;
  extern __shared__ __align__(128) std::uint8_t smem[];
  std::uint8_t* sa = smem;
  std::uint8_t* sb = smem + kRowsA * kKBytes;
  for (int i = threadIdx.x; i < kRowsA * kKBytes; i += blockDim.x)
    sa[tile_offset(i / kKBytes, i % kKBytes, kRowsA)] = a[i];
  for (int i = threadIdx.x; i < kRowsB * kKBytes; i += blockDim.x)
    sb[tile_offset(i / kKBytes, i % kKBytes, kRowsB)] = b[i];
  fence_async_shared();  // ordinary stores above, read next by the tensor cores (async proxy)
  __syncthreads();

  T d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0;
  const std::uint64_t da = make_smem_desc(sa, leading_bytes, stride_bytes);
  const std::uint64_t db = make_smem_desc(sb, leading_bytes, stride_bytes);
  if constexpr (kTrace)  // trace[0]: the last block's start; trace[1]: the first block's end
    if (threadIdx.x == 0) atomicMax(&trace[0], globaltimer_ns());
  for (long long it = 0; it < iterations; ++it) {
    if constexpr (kTrace) {  // block 0's progress: the global timer and the SM clock every kTraceEvery
      if (blockIdx.x == 0 && threadIdx.x == 0 && it % kTraceEvery == 0) {
        trace[2 + 2 * (it / kTraceEvery)] = globaltimer_ns();
        trace[3 + 2 * (it / kTraceEvery)] = static_cast<unsigned long long>(clock64());
      }
    }
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < kKSteps; ++s)
      mma<op>(d, da + ((s * kRowsA * kStepBytes) >> 4), db + ((s * kRowsB * kStepBytes) >> 4));
    wgmma::commit();
    wgmma::wait<1>();
  }
  wgmma::wait<0>();
  if constexpr (kTrace)
    if (threadIdx.x == 0) atomicMin(&trace[1], globaltimer_ns());

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (blockIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < 128; ++i) {
      int row, col;
      acc_coords(t, i, row, col);
      out[wg * kRowsA * kRowsB + row * kRowsB + col] = d[i];
    }
  } else {
    T sum = 0;
#pragma unroll
    for (int i = 0; i < 128; ++i) sum += d[i];
    if (sum == T(12345)) out[0] = sum;
  }
  counter.stop(cycles);
}

struct OpInfo {
  Op op;
  const char* resource;  // precision name in machine.json
  const char* key;       // datasheet key
  int element_bytes;
  const char* sass;      // instruction the SASS must hold (bench/check_sass.sh)
};

constexpr OpInfo kOps[] = {
    {Op::BF16, "bf16", "bf16", 2, "HGMMA"}, {Op::FP16, "fp16", "fp16", 2, "HGMMA"},
    {Op::TF32, "tf32", "tf32", 4, "HGMMA"}, {Op::E4M3, "fp8_e4m3", "fp8", 1, "QGMMA"},
    {Op::E5M2, "fp8_e5m2", "fp8", 1, "QGMMA"}, {Op::S8, "int8", "int8", 1, "IGMMA"}};

// FP8 operands as a per-tensor-scaled quantizer leaves them: N(0, 1) scaled so that 4.5 sigma meets
// the format's largest finite value, rounded to the nearest code (NaN/Inf codes never chosen).
// Random bytes spread the exponents over the whole range and draw more power: the H100 then holds
// a lower clock under E4M3 wgmma (1.61-1.66 GHz, against 1.73 for E5M2).
std::vector<std::uint8_t> scaled_normal_fp8(Op op, int rows, std::mt19937& rng) {
  std::vector<std::pair<double, std::uint8_t>> codes;  // positive finite codes, ascending
  for (int c = 0; c < 0x80; ++c) {
    const bool bad = (op == Op::E4M3 && c == 0x7F) || (op == Op::E5M2 && c >= 0x7C);
    const auto byte = std::uint8_t(c);
    if (!bad) codes.emplace_back(op == Op::E4M3 ? decode_e4m3(byte) : decode_e5m2(byte), byte);
  }
  std::normal_distribution<double> normal(0.0, codes.back().first / 4.5);
  std::vector<std::uint8_t> v(std::size_t(rows) * kKBytes);
  for (auto& x : v) {
    const double f = normal(rng);
    auto it = std::lower_bound(codes.begin(), codes.end(), std::pair{std::fabs(f), std::uint8_t(0)});
    if (it == codes.end()) it = std::prev(it);  // saturate
    if (it != codes.begin() && std::fabs(f) - std::prev(it)->first < it->first - std::fabs(f))
      it = std::prev(it);
    x = std::uint8_t(it->second | (f < 0 ? 0x80 : 0));
  }
  return v;
}

// Random operands of the op's type, never zero words, NaN/Inf excluded.
std::vector<std::uint8_t> random_operand(Op op, int rows, std::mt19937& rng) {
  std::vector<std::uint8_t> v(std::size_t(rows) * kKBytes);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::size_t i = 0; i < v.size();) {
    if (op == Op::BF16 || op == Op::FP16 || op == Op::TF32) {
      float f = uni(rng);
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      if (op == Op::TF32) {
        std::memcpy(&v[i], &bits, 4);
        i += 4;
        continue;
      }
      std::uint16_t h = op == Op::BF16 ? std::uint16_t(bits >> 16) : 0;
      if (op == Op::FP16) {  // |f| < 1: a normal or subnormal half, rounded toward zero
        __half hf = __float2half_rz(f);
        std::memcpy(&h, &hf, 2);
      }
      std::memcpy(&v[i], &h, 2);
      i += 2;
      continue;
    }
    int x = byte(rng);
    bool bad = (op == Op::E4M3 && (x & 0x7F) == 0x7F) || (op == Op::E5M2 && (x & 0x7C) == 0x7C);
    if (!bad) v[i++] = std::uint8_t(x);
  }
  return v;
}

double element(Op op, const std::uint8_t* p) {
  std::uint16_t h;
  std::uint32_t w;
  switch (op) {
    case Op::BF16: std::memcpy(&h, p, 2); return decode_bf16(h);
    case Op::FP16: std::memcpy(&h, p, 2); return decode_fp16(h);
    case Op::TF32: std::memcpy(&w, p, 4); return decode_tf32(w);
    case Op::E4M3: return decode_e4m3(*p);
    case Op::E5M2: return decode_e5m2(*p);
    case Op::S8: return double(static_cast<std::int8_t>(*p));
  }
  return 0;
}

// D = iterations x A B^T for each warpgroup, in float64.
std::vector<double> reference(const OpInfo& info, const std::vector<std::uint8_t>& a,
                              const std::vector<std::uint8_t>& b, long long iterations) {
  int k = kKBytes / info.element_bytes;
  std::vector<double> one(std::size_t(kRowsA) * kRowsB);
  for (int m = 0; m < kRowsA; ++m)
    for (int n = 0; n < kRowsB; ++n) {
      double s = 0;
      for (int j = 0; j < k; ++j)
        s += element(info.op, &a[m * kKBytes + j * info.element_bytes]) *
             element(info.op, &b[n * kKBytes + j * info.element_bytes]);
      one[m * kRowsB + n] = s * double(iterations);
    }
  std::vector<double> all;
  for (int w = 0; w < kMaxWarpgroups; ++w) all.insert(all.end(), one.begin(), one.end());
  return all;
}

// One launch's arguments.
struct Launch {
  const DeviceBuffer *a, *b, *out, *cycles;
  int blocks, warpgroups;
  long long iterations;
  int lbo, sbo;
  const DeviceBuffer* trace = nullptr;  // block 0's trace points (wgmma_kernel<op, true>)
};

template <Op op>
void launch(const Launch& l, cudaStream_t stream) {
  using T = typename Acc<op>::type;
  reset_cycles(*l.cycles, stream);
  if (l.trace)
    wgmma_kernel<op, true><<<l.blocks, 128 * l.warpgroups, kSmemBytes, stream>>>(
        l.a->get<std::uint8_t>(), l.b->get<std::uint8_t>(), l.out->get<T>(), l.iterations, l.lbo, l.sbo,
        l.cycles->get<long long>(), l.trace->get<unsigned long long>());
  else
    wgmma_kernel<op><<<l.blocks, 128 * l.warpgroups, kSmemBytes, stream>>>(
        l.a->get<std::uint8_t>(), l.b->get<std::uint8_t>(), l.out->get<T>(), l.iterations, l.lbo, l.sbo,
        l.cycles->get<long long>());
  check_launch("wgmma_kernel");
}

void launch_op(Op op, const Launch& l, cudaStream_t s) {
  switch (op) {
    case Op::BF16: return launch<Op::BF16>(l, s);
    case Op::FP16: return launch<Op::FP16>(l, s);
    case Op::TF32: return launch<Op::TF32>(l, s);
    case Op::E4M3: return launch<Op::E4M3>(l, s);
    case Op::E5M2: return launch<Op::E5M2>(l, s);
    case Op::S8: return launch<Op::S8>(l, s);
  }
}

std::vector<double> read_output(Op op, const DeviceBuffer& out) {
  std::size_t n = std::size_t(kMaxWarpgroups) * kRowsA * kRowsB;
  std::vector<double> r(n);
  if (op == Op::S8) {
    std::vector<int> h(n);
    check(cudaMemcpy(h.data(), out.get(), n * 4, cudaMemcpyDeviceToHost), "copy wgmma output");
    for (std::size_t i = 0; i < n; ++i) r[i] = h[i];
  } else {
    std::vector<float> h(n);
    check(cudaMemcpy(h.data(), out.get(), n * 4, cudaMemcpyDeviceToHost), "copy wgmma output");
    for (std::size_t i = 0; i < n; ++i) r[i] = h[i];
  }
  return r;
}

// Runs a short launch on fresh random data, poisoned output first, and compares with the float64
// reference. Tries the two readings of the descriptor's byte offsets; returns the one that passes.
CheckResult check_op(const OpInfo& info, int& lbo, int& sbo, unsigned seed) {
  std::mt19937 rng(seed);
  auto ha = random_operand(info.op, kRowsA, rng), hb = random_operand(info.op, kRowsB, rng);
  DeviceBuffer a(ha.size()), b(hb.size()), out(std::size_t(kMaxWarpgroups) * kRowsA * kRowsB * 4);
  DeviceBuffer cycles = cycle_buffer();
  check(cudaMemcpy(a.get(), ha.data(), ha.size(), cudaMemcpyHostToDevice), "copy A");
  check(cudaMemcpy(b.get(), hb.data(), hb.size(), cudaMemcpyHostToDevice), "copy B");
  const long long iterations = 3;
  auto want = reference(info, ha, hb, iterations);
  // FP8 wgmma accumulates with fewer mantissa bits than FP32 (seen here: relative error 2e-4 to
  // 4e-4 on random E4M3/E5M2 over K = 128; DeepSeek-V3's report measures about 14 bits).
  const bool fp8 = info.op == Op::E4M3 || info.op == Op::E5M2;
  double tolerance = info.op == Op::S8 ? 0 : info.op == Op::TF32 ? 1e-3 : fp8 ? 2e-3 : 1e-5;
  CheckResult best;
  best.error = 1e30;
  for (auto [l, s] : {std::pair{128, 256}, std::pair{256, 128}}) {
    check(cudaMemset(out.get(), 0xFF, out.bytes()), "poison output");  // NaN / -1 everywhere
    launch_op(info.op, Launch{&a, &b, &out, &cycles, 2, kMaxWarpgroups, iterations, l, s}, nullptr);
    check(cudaDeviceSynchronize(), "wgmma check");
    CheckResult r = compare(read_output(info.op, out), want, tolerance);
    if (r.error < best.error) {
      best = r;
      lbo = l;
      sbo = s;
    }
    if (r.pass) break;
  }
  return best;
}

// Times one op with `wgs` warpgroups per SM, about 10 ms per launch at the datasheet rate: long
// enough for the clock to settle under load.
Measurement time_op(const OpInfo& info, int wgs, int blocks, int lbo, int sbo, const DeviceBuffer& a,
                    const DeviceBuffer& b, const DeviceBuffer& out, const ProbeOptions& options,
                    const Device& device, long long& iterations) {
  DeviceBuffer cycles = cycle_buffer();
  const double k_elems = double(kKBytes) / info.element_bytes;
  const double flop_per_iteration = 2.0 * kRowsA * kRowsB * k_elems * wgs * blocks;
  auto peak = compute_datasheet(9, 0, info.key, blocks, 1.98e9);
  iterations = (long long)(0.010 * (peak ? peak->value : 1e15) / flop_per_iteration);
  if (options.quick) iterations /= 4;
  Measurement m;
  m.kind = CeilingKind::Compute;
  m.resource = info.resource;
  m.operation = "mma";
  m.isa = "wgmma";
  m.unit = info.op == Op::S8 ? "OP/s" : "FLOP/s";
  m.work_per_launch = flop_per_iteration * double(iterations);
  const Launch l{&a, &b, &out, &cycles, blocks, wgs, iterations, lbo, sbo};
  m.timing = gpu::time_launches([&](void* s) { launch_op(info.op, l, cudaStream_t(s)); },
                                timing_options(options, device, false));
  m.sm_cycles_per_launch = read_cycles(cycles);
  return m;
}

// `like` (resource, unit, ...) as launches timed one by one: `work` each, their seconds and SM
// clocks, the NVML clocks before the first and after the last.
Measurement timed_alone(const Measurement& like, double work, const std::vector<double>& seconds,
                        const std::vector<double>& sm_hz, const gpu::Clocks& first, const gpu::Clocks& last) {
  Measurement m = like;
  m.work_per_launch = work;
  m.timing = gpu::GpuTiming{};
  m.timing.seconds = summarize(seconds);
  m.timing.clocks = {first.sm_hz, last.sm_hz, first.memory_hz, last.memory_hz, false};
  m.sm_cycles_per_launch = summarize(sm_hz).median * m.timing.seconds.median;
  return m;
}

// Launches of about 2 ms, each alone after an idle pause, timed with events: the rate of the first
// milliseconds of a burst, before the power limiter answers (a GEMM after a pause runs there; the
// back-to-back 10 ms launches of time_op settle at the power limit within their ~0.2 s: FP8 E4M3 at
// 1.65 GHz on the H100). Launches of 0.5 ms ran 8-10 % slower than these on the H100 (all six
// precisions): the ramp of a launch weighs more than the clock gained.
Measurement time_after_idle(const OpInfo& info, const Measurement& back_to_back, const Launch& full,
                            const ProbeOptions& options, const Device& device, double& pause_seconds) {
  DeviceBuffer cycles = cycle_buffer();
  Launch l = full;
  l.cycles = &cycles;
  l.iterations = std::max(1LL, (options.quick ? 4 : 1) * full.iterations / 5);
  pause_seconds = options.quick ? 0.25 : 0.5;
  const int samples = options.quick ? 3 : 5;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  const int dev = device_index(device);
  std::vector<double> seconds, sm_hz;
  gpu::Clocks first, last;
  for (int i = 0; i < samples; ++i) {
    std::this_thread::sleep_for(std::chrono::duration<double>(pause_seconds));
    reset_cycles(cycles, stream);
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    launch_op(info.op, l, stream);
    check_launch("wgmma (after idle)");
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    if (i == 0) first = gpu::read_clocks(dev);
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    seconds.push_back(ms * 1e-3);
    sm_hz.push_back(read_cycles(cycles) / (ms * 1e-3));
  }
  last = gpu::read_clocks(dev);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return timed_alone(back_to_back,
                     back_to_back.work_per_launch * double(l.iterations) / double(full.iterations), seconds,
                     sm_hz, first, last);
}

// The best 1 ms inside launches three times the full length, each after an idle pause: the clock
// starts low after the pause and climbs through the launch (H200, E4M3: 1.64 GHz in the first
// 0.5 ms, 1.69-1.74 at its best, 10-30 ms in) before the power limit pulls the held launches back
// down, so a burst runs faster than any whole launch averages. Block 0's warpgroup 0 records the
// global timer and its SM clock every kTraceEvery iterations (best_clock_window picks the window, by
// the SM clock, inside the span where every block runs). One SM clock drives every SM, and an SM's
// work per cycle is the back-to-back launch's (its work over its SM cycles, 0.997-1.000 of the
// datasheet's per-clock rate), so a window's rate is that work per cycle times the window's clock.
// Warpgroup 0's own progress over the window is recorded beside it as a check: it matches (1.0000)
// with two warpgroups an SM; with three the tensor pipe serves them unevenly over a millisecond.
// Returns the window's rate per launch as a Measurement (work: 1 ms at the median rate); `profile`
// gets each launch's span, its first and last 0.5 ms clock and its best window.
Measurement time_best_window(const OpInfo& info, const Measurement& back_to_back, const Launch& full,
                             const ProbeOptions& options, const Device& device, nlohmann::json& profile) {
  constexpr double kWindow = 1e-3;
  if (back_to_back.sm_cycles_per_launch <= 0)
    throw InputError("cuda.tensor: no SM cycle count for the launch");
  const double work_per_cycle = back_to_back.work_per_launch / back_to_back.sm_cycles_per_launch;
  const double work_per_iteration = back_to_back.work_per_launch / double(full.iterations);
  Launch l = full;
  l.iterations = 3 * full.iterations;
  const long long points = l.iterations / kTraceEvery + 1;
  DeviceBuffer cycles = cycle_buffer(), trace(std::size_t(points + 1) * 16);
  l.cycles = &cycles;
  l.trace = &trace;
  const int dev = device_index(device);
  std::vector<double> rates, sm_hz;
  profile = nlohmann::json::array();
  gpu::Clocks first_clocks;
  for (int sample = 0; sample < 3; ++sample) {
    std::this_thread::sleep_for(std::chrono::duration<double>(options.quick ? 0.25 : 0.5));
    std::vector<unsigned long long> h(std::size_t(points + 1) * 2, 0);
    h[1] = ~0ULL;  // the first block's end: atomicMin from here
    check(cudaMemcpy(trace.get(), h.data(), trace.bytes(), cudaMemcpyHostToDevice), "reset trace");
    launch_op(info.op, l, nullptr);
    if (sample == 0) first_clocks = gpu::read_clocks(dev);
    check(cudaDeviceSynchronize(), "wgmma (traced)");
    check(cudaMemcpy(h.data(), trace.get(), trace.bytes(), cudaMemcpyDeviceToHost), "copy trace");
    const auto w = best_clock_window(h, points, kTraceEvery, kWindow, 0.5e-3);
    if (!w) throw InputError("cuda.tensor: every block ran together for less than 1 ms");
    const double rate = work_per_cycle * w->window_sm_hz;
    // Warpgroup 0's progress as if every warpgroup of every block advanced as it did.
    const double progress = w->window_iterations_per_s * work_per_iteration;
    rates.push_back(rate);
    sm_hz.push_back(w->window_sm_hz);
    profile.push_back({{"all_blocks_running_s", w->all_blocks_running_s},
                       {"sm_hz_first_0.5ms", w->sm_hz_first},
                       {"sm_hz_last_0.5ms", w->sm_hz_last},
                       {"window_rate", rate},
                       {"window_sm_hz", w->window_sm_hz},
                       {"window_at_s", w->window_at_s},
                       {"warpgroup0_progress_over_rate", progress / rate}});
  }
  const gpu::Clocks last_clocks = gpu::read_clocks(dev);
  const double median_rate = summarize(rates).median;
  std::vector<double> seconds;
  for (double r : rates) seconds.push_back(median_rate * kWindow / r);
  return timed_alone(back_to_back, median_rate * kWindow, seconds, sm_hz, first_clocks, last_clocks);
}

// A precision's burst launch, kept (operands and all) until every burst is measured.
struct HeldLaunch {
  const OpInfo* info;
  DeviceBuffer a, b, out;
  int blocks, warpgroups;
  long long iterations;
  int lbo, sbo;
  Ceiling burst;
  double work_per_launch;  // the back-to-back launch's
  bool check_passed;
};

void run_tensor_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  check(cudaSetDevice(dev), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  if (p.major != 9) {
    profile.conditions["cuda.tensor." + device.id] = "skipped: wgmma needs sm_90a (Hopper)";
    return;
  }
  std::vector<HeldLaunch> holds;
  for (const OpInfo& info : kOps) {
    int lbo = 128, sbo = 256;
    CheckResult chk = check_op(info, lbo, sbo, 1234u + unsigned(info.op));
    DeviceBuffer a(std::size_t(kRowsA) * kKBytes), b(std::size_t(kRowsB) * kKBytes),
        out(std::size_t(kMaxWarpgroups) * kRowsA * kRowsB * 4);
    // Operands: random data; FP8 also as a scaled quantizer leaves it (scaled_normal_fp8).
    const bool fp8 = info.op == Op::E4M3 || info.op == Op::E5M2;
    auto upload = [&](bool scaled) {
      std::mt19937 rng(99u + unsigned(info.op));
      auto ha = scaled ? scaled_normal_fp8(info.op, kRowsA, rng) : random_operand(info.op, kRowsA, rng);
      auto hb = scaled ? scaled_normal_fp8(info.op, kRowsB, rng) : random_operand(info.op, kRowsB, rng);
      check(cudaMemcpy(a.get(), ha.data(), ha.size(), cudaMemcpyHostToDevice), "copy A");
      check(cudaMemcpy(b.get(), hb.data(), hb.size(), cudaMemcpyHostToDevice), "copy B");
    };
    const int blocks = p.multiProcessorCount;
    // The ceiling is the best of 2 and 3 warpgroups per SM and of the operand forms; all are recorded.
    nlohmann::json tried = nlohmann::json::object();
    Measurement best;
    int best_wgs = 0;
    bool best_scaled = false;
    long long best_iterations = 0;
    for (bool scaled : fp8 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      upload(scaled);
      for (int wgs : {2, 3}) {
        long long iterations = 0;
        Measurement m = time_op(info, wgs, blocks, lbo, sbo, a, b, out, options, device, iterations);
        double rate = m.work_per_launch / m.timing.seconds.median;
        tried[std::string(scaled ? "scaled_normal/" : "") + std::to_string(wgs)] = rate;
        if (best_wgs == 0 || rate > best.work_per_launch / best.timing.seconds.median) {
          best = m;
          best_wgs = wgs;
          best_scaled = scaled;
          best_iterations = iterations;
        }
      }
    }
    upload(best_scaled);
    // The burst ceiling is the better of back-to-back launches and launches after an idle pause.
    double pause = 0;
    const Launch full{&a, &b, &out, nullptr, blocks, best_wgs, best_iterations, lbo, sbo};
    const Measurement idle = time_after_idle(info, best, full, options, device, pause);
    nlohmann::json traced;
    const Measurement window = time_best_window(info, best, full, options, device, traced);
    const double rate_back_to_back = best.work_per_launch / best.timing.seconds.median;
    const double rate_idle = idle.work_per_launch / idle.timing.seconds.median;
    const double rate_window = window.work_per_launch / window.timing.seconds.median;
    const nlohmann::json forms = {
        {"back_to_back", {{"rate", rate_back_to_back}, {"launch_seconds", best.timing.seconds.median}}},
        {"after_idle",
         {{"rate", rate_idle},
          {"launch_seconds", idle.timing.seconds.median},
          {"pause_seconds", pause},
          {"samples", idle.timing.seconds.samples},
          {"sm_hz", idle.sm_cycles_per_launch / idle.timing.seconds.median}}},
        {"best_1ms_after_idle",
         {{"rate", rate_window},
          {"launches", traced},
          {"sm_hz", window.sm_cycles_per_launch / window.timing.seconds.median}}}};
    const double work_back_to_back = best.work_per_launch;  // the held launch is the back-to-back one
    const char* form = "back_to_back";
    if (rate_idle > std::max(rate_back_to_back, rate_window)) best = idle, form = "after_idle";
    if (rate_window > std::max(rate_back_to_back, rate_idle)) best = window, form = "best_1ms_after_idle";
    const int k = kKBytes / info.element_bytes / kKSteps;
    nlohmann::json params = {{"form", form},
                             {"rate_by_form", forms},
                             {"instruction", "wgmma.mma_async m64n256k" + std::to_string(k)},
                             {"sass", info.sass},
                             {"warpgroups_per_sm", best_wgs},
                             {"rate_by_warpgroups_per_sm", tried},  // "scaled_normal/N": FP8 scaled operands
                             {"blocks", blocks},
                             {"iterations", best_iterations},
                             {"operands", std::string("shared memory (descriptors, no swizzle), ") +
                                              (best_scaled ? "N(0,1) scaled to 4.5 sigma = the largest "
                                                             "finite value, rounded to the nearest code"
                                                           : "random data")},
                             {"descriptor_leading_bytes", lbo},
                             {"descriptor_stride_bytes", sbo},
                             {"check", chk.to_json()}};
    Ceiling c = make_ceiling(device, "cuda.tensor", best, params);
    attach_datasheet(c, compute_datasheet(p.major, p.minor, info.key, blocks, c.frequency_hz));
    if (!chk.pass) c.flag = "check_failed";
    if (options.sustained_seconds > 0)
      holds.push_back({&info, std::move(a), std::move(b), std::move(out), blocks, best_wgs, best_iterations,
                       lbo, sbo, c, work_back_to_back, chk.pass});
    profile.ceilings.push_back(std::move(c));
  }
  // The same launches held at the power limit, after every precision's burst: a hold heats the GPU,
  // and a burst measured after one read low (H200, `--quick --sustained 10`: E4M3 1771.6 TFLOP/s
  // with each precision's hold before the next one's burst, 1822.8 with the holds last).
  for (HeldLaunch& h : holds) {
    DeviceBuffer cycles = cycle_buffer();
    const Launch l{&h.a, &h.b, &h.out, &cycles, h.blocks, h.warpgroups, h.iterations, h.lbo, h.sbo};
    Ceiling held = hold_ceiling(
        h.burst, [&](cudaStream_t s) { launch_op(h.info->op, l, s), check_launch("wgmma (held)"); },
        h.work_per_launch, options.sustained_seconds, dev, [&] { return read_cycles(cycles); });
    if (!h.check_passed) held.flag = "check_failed";
    profile.ceilings.push_back(std::move(held));
  }
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.tensor", "cuda",
                      "tensor-core FLOP/s per precision through wgmma (bf16, fp16, tf32, fp8, int8)",
                      run_tensor_probe);

}  // namespace rafter::probes::cuda
