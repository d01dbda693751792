// cuda.dmma: the FP64 tensor path (DMMA) through mma.sync, two shapes: m8n8k4 (WMMA, DMMA.884,
// the sm_80 shape) and m16n8k16 (PTX, sm_90). Each warp keeps 4 independent accumulators and
// multiplies the same A and B fragments into them. FLOPs per launch: warps x iterations x 4 x
// 2 x M x N x K. Both are checked against a float64 host reference on random data; the ceiling is
// the faster shape whose check passed.
#include <mma.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_util.hpp"
#include "gpu_model.hpp"

namespace rafter::probes::cuda {
namespace {

constexpr int kChains = 4;
constexpr int kThreads = 256;

// A is M x K row-major, B is K x N row-major, out is kChains x M x N row-major (block 0, warp 0).
__global__ void __launch_bounds__(kThreads, 2) dmma884(const double* a, const double* b, double* out, int iterations,
                                                     long long* cycles) {
  const CycleCounter counter;
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 8, 8, 4, double> acc[kChains];
  wmma::load_matrix_sync(fa, a, 4);
  wmma::load_matrix_sync(fb, b, 8);
#pragma unroll
  for (int i = 0; i < kChains; ++i) wmma::fill_fragment(acc[i], 0.0);
  for (int it = 0; it < iterations; ++it)
#pragma unroll
    for (int i = 0; i < kChains; ++i) wmma::mma_sync(acc[i], fa, fb, acc[i]);
  if (blockIdx.x == 0 && threadIdx.x < 32) {
#pragma unroll
    for (int i = 0; i < kChains; ++i) wmma::store_matrix_sync(out + i * 64, acc[i], 8, wmma::mem_row_major);
  } else {
    double s = 0;
#pragma unroll
    for (int i = 0; i < kChains; ++i)
      for (int e = 0; e < acc[i].num_elements; ++e) s += acc[i].x[e];
    if (s == 12345.0) out[0] = s;
  }
  counter.stop(cycles);
}

// mma.sync m16n8k16 f64 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16" with .f64), with
// g = lane / 4, t = lane % 4: a_i = A[g + 8 (i % 2)][t + 4 (i / 2)] (8 values),
// b_i = B[t + 4 i][g] (4 values), c_i = C[g + 8 (i / 2)][2 t + i % 2] (4 values).
__global__ void __launch_bounds__(kThreads, 2) dmma16816(const double* a, const double* b, double* out, int iterations,
                                                       long long* cycles) {
  const CycleCounter counter;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  double fa[8], fb[4], acc[kChains][4];
#pragma unroll
  for (int i = 0; i < 8; ++i) fa[i] = a[(g + 8 * (i % 2)) * 16 + t + 4 * (i / 2)];
#pragma unroll
  for (int i = 0; i < 4; ++i) fb[i] = b[(t + 4 * i) * 8 + g];
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[c][i] = 0;
  for (int it = 0; it < iterations; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
          "{%12,%13,%14,%15}, {%0,%1,%2,%3};\n"
          : "+d"(acc[c][0]), "+d"(acc[c][1]), "+d"(acc[c][2]), "+d"(acc[c][3])
          : "d"(fa[0]), "d"(fa[1]), "d"(fa[2]), "d"(fa[3]), "d"(fa[4]), "d"(fa[5]), "d"(fa[6]), "d"(fa[7]),
            "d"(fb[0]), "d"(fb[1]), "d"(fb[2]), "d"(fb[3]));
  if (blockIdx.x == 0 && threadIdx.x < 32) {
#pragma unroll
    for (int c = 0; c < kChains; ++c)
#pragma unroll
      for (int i = 0; i < 4; ++i) out[c * 128 + (g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[c][i];
  } else {
    double s = 0;
#pragma unroll
    for (int c = 0; c < kChains; ++c)
#pragma unroll
      for (int i = 0; i < 4; ++i) s += acc[c][i];
    if (s == 12345.0) out[0] = s;
  }
  counter.stop(cycles);
}

struct Shape {
  const char* name;
  const char* sass;
  int m, n, k;
  decltype(&dmma884) kernel;
};

const Shape kShapes[] = {{"mma.sync m8n8k4 f64 (wmma)", "DMMA.8x8x4", 8, 8, 4, dmma884},
                         {"mma.sync m16n8k16 f64", "DMMA.16x8x16", 16, 8, 16, dmma16816}};

struct Operands {
  std::vector<double> a, b;
  DeviceBuffer da, db;
};

Operands random_operands(const Shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Operands o{std::vector<double>(s.m * s.k), std::vector<double>(s.k * s.n), DeviceBuffer(s.m * s.k * 8),
             DeviceBuffer(s.k * s.n * 8)};
  for (auto& v : o.a) v = u(rng);
  for (auto& v : o.b) v = u(rng);
  check(cudaMemcpy(o.da.get(), o.a.data(), o.a.size() * 8, cudaMemcpyHostToDevice), "copy dmma A");
  check(cudaMemcpy(o.db.get(), o.b.data(), o.b.size() * 8, cudaMemcpyHostToDevice), "copy dmma B");
  return o;
}

// Relative Frobenius error of block 0's accumulators against iterations x A B.
double check_shape(const Shape& s, unsigned seed) {
  Operands o = random_operands(s, seed);
  const int tile = s.m * s.n;
  DeviceBuffer out(std::size_t(kChains) * tile * 8);
  DeviceBuffer cycles = cycle_buffer();
  check(cudaMemset(out.get(), 0xFF, out.bytes()), "poison dmma output");
  const int iterations = 5;
  s.kernel<<<2, kThreads>>>(o.da.get<double>(), o.db.get<double>(), out.get<double>(), iterations,
                            cycles.get<long long>());
  check_launch("dmma kernel");
  std::vector<double> got(std::size_t(kChains) * tile);
  check(cudaMemcpy(got.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost), "copy dmma output");
  double err2 = 0, ref2 = 0;
  for (int c = 0; c < kChains; ++c)
    for (int r = 0; r < s.m; ++r)
      for (int col = 0; col < s.n; ++col) {
        double want = 0;
        for (int k = 0; k < s.k; ++k) want += o.a[r * s.k + k] * o.b[k * s.n + col];
        want *= iterations;
        double d = got[c * tile + r * s.n + col] - want;
        err2 += d * d;
        ref2 += want * want;
      }
  double e = std::sqrt(err2 / ref2);
  return std::isfinite(e) ? e : 1e30;
}

Measurement time_shape(const Shape& s, const ProbeOptions& options, const Device& device, int sms, double peak) {
  Operands o = random_operands(s, 77u);
  const int blocks = 2 * sms;  // m16n8k16 holds 122 registers: 2 blocks per SM, one wave
  DeviceBuffer out(std::size_t(kChains) * s.m * s.n * 8);
  DeviceBuffer cycles = cycle_buffer();
  const double flop_per_iteration = double(blocks) * kThreads / 32 * kChains * 2.0 * s.m * s.n * s.k;
  const int iterations = int(0.005 * peak / flop_per_iteration) + 1;  // about 5 ms per launch
  Measurement m{CeilingKind::Compute, "fp64", "mma", "dmma", flop_per_iteration * iterations, "FLOP/s", {}};
  m.timing = gpu::time_launches(
      [&](void* st) {
        reset_cycles(cycles, cudaStream_t(st));
        s.kernel<<<blocks, kThreads, 0, cudaStream_t(st)>>>(o.da.get<double>(), o.db.get<double>(), out.get<double>(),
                                                            iterations, cycles.get<long long>());
        check_launch("dmma kernel");
      },
      timing_options(options, device, false));
  m.sm_cycles_per_launch = read_cycles(cycles);
  return m;
}

void run_dmma_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  check(cudaSetDevice(dev), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  if (p.major < 8) return;  // no FP64 tensor path before sm_80
  const double peak = per_sm_per_clock(p.major, p.minor, "fp64_tensor").value_or(256) * p.multiProcessorCount * 1.98e9;
  nlohmann::json tried = nlohmann::json::object();
  Measurement best;
  const Shape* best_shape = nullptr;
  double best_error = 0;
  for (const Shape& s : kShapes) {
    if (s.m == 16 && p.major < 9) continue;  // m16n8k16 f64 needs sm_90
    double error = check_shape(s, 21u);
    Measurement m = time_shape(s, options, device, p.multiProcessorCount, peak);
    double rate = m.work_per_launch / m.timing.seconds.median;
    tried[s.name] = {{"flops_per_second", rate}, {"relative_error", error}, {"pass", error < 1e-12}};
    if (error < 1e-12 && (!best_shape || rate > best.work_per_launch / best.timing.seconds.median)) {
      best = m;
      best_shape = &s;
      best_error = error;
    }
  }
  if (!best_shape) {
    profile.conditions["cuda.dmma." + device.id] = {{"error", "no DMMA shape passed its check"}, {"shapes", tried}};
    return;
  }
  nlohmann::json params = {{"instruction", best_shape->name}, {"sass", best_shape->sass}, {"shapes", tried},
                           {"check", {{"pass", true}, {"relative_error", best_error}, {"tolerance", 1e-12},
                                      {"reference", "float64 on the host"}}}};
  Ceiling c = make_ceiling(device, "cuda.dmma", best, params);
  attach_datasheet(c, compute_datasheet(p.major, p.minor, "fp64_tensor", p.multiProcessorCount, c.frequency_hz));
  profile.ceilings.push_back(std::move(c));
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.dmma", "cuda", "FP64 tensor-core FLOP/s (DMMA, mma.sync m8n8k4 and m16n8k16)",
                      run_dmma_probe);

}  // namespace rafter::probes::cuda
