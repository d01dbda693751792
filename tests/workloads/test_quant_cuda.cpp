// The GPU quantizers (workloads/cuda/kernels_quant.cu) against the CPU encoder byte for byte
// (round to nearest even: codes, scales, tensor scale; the decoders' BF16 and FP32 output), and
// stochastic rounding's two promises: it is unbiased (the mean over many seeds converges on the
// input, far below round-to-nearest's error) and it is a function of (seed, element).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rafter/collector/error.hpp"
#include "rafter/workloads/formats.hpp"

#if RAFTER_HAVE_CUDA
#include <cuda_runtime.h>

#include "../../workloads/cpu/block_quant.hpp"
#include "../../workloads/cuda/quantize.hpp"
#include "rafter/collector/gpu_timing.hpp"

using namespace rafter::workloads;
namespace numfmt = rafter::workloads::numfmt;

namespace {

struct Format {
  const char* precision;
  bool block2d;
  cuda::QuantFormat gpu;
};
const Format kFormats[] = {{"nvfp4", false, cuda::QuantFormat::Nvfp4},
                           {"nvfp4", true, cuda::QuantFormat::Nvfp4Tile16},
                           {"mxfp4", false, cuda::QuantFormat::Mxfp4},
                           {"fp8_e4m3", false, cuda::QuantFormat::Fp8E4m3},
                           {"fp8_e5m2", false, cuda::QuantFormat::Fp8E5m2}};

// BF16 values, magnitudes spread over 2^-12..2^6 by row (subnormal E4M3 block scales, varied E8M0
// exponents), with some exact zeros and exact ties.
// shift: every magnitude times 2^shift (-118: 2^-130..2^-112, block scales under 2^-128).
std::vector<std::uint16_t> random_bf16(std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                                       int shift = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<std::uint16_t> x(std::size_t(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      double v = u(rng) * std::ldexp(1.0, int(r * 5 % 19) - 12 + shift);
      if (c % 37 == 0) v = 0;
      if (c % 41 == 0)
        v = std::ldexp(1.25, int(r % 7) - 3 + shift);  // halfway between E2M1 neighbours at some scales
      x[std::size_t(r * cols + c)] = numfmt::float_to_bf16(static_cast<float>(v));
    }
  return x;
}

template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(std::size_t count) {
    EXPECT_EQ(cudaMalloc(&p, std::max<std::size_t>(1, count) * sizeof(T)), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> host(std::size_t count) const {
    std::vector<T> h(count);
    EXPECT_EQ(cudaMemcpy(h.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

struct GpuQuantized {
  Dev<std::uint8_t> codes, scales, workspace;
  Dev<float> tensor_scale{1};
  GpuQuantized(cuda::QuantFormat f, std::int64_t rows, std::int64_t cols)
      : codes(cuda::quant_code_bytes(f, rows, cols)),
        scales(cuda::quant_scale_bytes(f, rows, cols)),
        workspace(cuda::quant_workspace_bytes()) {
    EXPECT_EQ(cudaMemset(workspace.p, 0, cuda::quant_workspace_bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemset(codes.p, 0xff, cuda::quant_code_bytes(f, rows, cols)), cudaSuccess);
  }
  cuda::QuantTensorRef ref() const { return {codes.p, scales.p, tensor_scale.p}; }
};

// A random_bf16 tensor on the host, as fp32 for the CPU encoder, and on the GPU.
struct Input {
  std::vector<std::uint16_t> x;
  std::vector<float> xf;
  Dev<__nv_bfloat16> dx;
  Input(std::int64_t rows, std::int64_t cols, std::uint64_t seed, int shift = 0)
      : x(random_bf16(rows, cols, seed, shift)), xf(x.size()), dx(x.size()) {
    for (std::size_t i = 0; i < x.size(); ++i) xf[i] = numfmt::bf16_to_float(x[i]);
    EXPECT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
};

class GpuQuant : public ::testing::Test {
 protected:
  void SetUp() override {
    if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

// The CPU encoder's rows × cols tensor in format f, allocated.
cpu::QuantizedTensor cpu_tensor(const Format& f, std::int64_t rows, std::int64_t cols) {
  cpu::QuantizedTensor q;
  q.precision = f.precision, q.rows = rows, q.cols = cols, q.block2d = f.block2d;
  q.allocate();
  return q;
}

// Two shapes: rows of 48 vectors, and of 272 (at least a CTA's 256 threads: the 16×16 decoder
// walks a thread's vectors along their rows, across a row's end at varying columns).
TEST_F(GpuQuant, RoundToNearestBytesEqualTheCpuEncoder) {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{64, 384}, {32, 2176}}) {
    const Input in(rows, cols, 7);
    ASSERT_FALSE(HasFailure());  // the upload
    const auto& x = in.x;
    const auto& xf = in.xf;
    const auto& dx = in.dx;
    for (const Format& f : kFormats)
      for (bool rht : {false, true}) {
        SCOPED_TRACE(std::string(f.precision) + (f.block2d ? " 16x16" : "") + (rht ? " rht" : "") + " " +
                     std::to_string(rows) + "x" + std::to_string(cols));
        cpu::QuantizedTensor q = cpu_tensor(f, rows, cols);
        cpu::quantize(xf.data(), q, {rht, false, 1});
        GpuQuantized g(f.gpu, rows, cols);
        cuda::quantize_bf16(dx.p, g.ref(), rows, cols, f.gpu, {rht, false, 1}, g.workspace.p, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::size_t nc = cuda::quant_code_bytes(f.gpu, rows, cols),
                          ns = cuda::quant_scale_bytes(f.gpu, rows, cols);
        ASSERT_EQ(nc, q.values.bytes());
        EXPECT_EQ(g.codes.host(nc),
                  std::vector<std::uint8_t>(static_cast<std::uint8_t*>(q.values.data()),
                                            static_cast<std::uint8_t*>(q.values.data()) + nc));
        if (ns) {
          ASSERT_EQ(ns, std::size_t(q.scale_count()));
          EXPECT_EQ(g.scales.host(ns),
                    std::vector<std::uint8_t>(static_cast<std::uint8_t*>(q.scales.data()),
                                              static_cast<std::uint8_t*>(q.scales.data()) + ns));
        }
        if (f.gpu != cuda::QuantFormat::Mxfp4) {
          EXPECT_EQ(g.tensor_scale.host(1)[0], q.tensor_scale);
        }
        // Decoders: BF16 and FP32 bits equal the CPU's.
        const std::size_t n = x.size();
        Dev<__nv_bfloat16> y16(n);
        Dev<float> y32(n);
        cuda::dequantize_to_bf16(g.ref(), y16.p, rows, cols, f.gpu, nullptr);
        cuda::dequantize_to_f32(g.ref(), y32.p, rows, cols, f.gpu, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<std::uint16_t> want16(n), got16(n);
        std::vector<float> want32(n);
        cpu::dequantize(q, want16.data());
        cpu::dequantize(q, want32.data());
        ASSERT_EQ(cudaMemcpy(got16.data(), y16.p, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(got16, want16);
        const auto got32 = y32.host(n);
        EXPECT_EQ(std::memcmp(got32.data(), want32.data(), n * 4), 0);
      }
  }
}

// A tensor so small that some block scales are under 2^-128: their RN(1/S) overflows, and every
// encoder divides instead (numfmt::fp4_quotient; on the GPU the block-uniform branch of
// encode_fp4x8). The FP4 formats' bytes still equal the CPU encoder's. NVFP4's 16×16 tiles span 16
// rows of random_bf16's 19 row magnitudes, so their input is 2^14 smaller again (every tile's
// maximum under 2^-126). MXFP4's power-of-two scales are at least 2^-127: its 1/S never overflows,
// and its bytes are checked on the 1×16 input alone.
TEST_F(GpuQuant, TinyTensorsDivideWhereTheReciprocalOverflows) {
  const std::int64_t rows = 64, cols = 384;
  const Input small(rows, cols, 5, -118), smaller(rows, cols, 5, -132);
  ASSERT_FALSE(HasFailure());  // the uploads
  for (const Format& f : kFormats) {
    if (f.gpu == cuda::QuantFormat::Fp8E4m3 || f.gpu == cuda::QuantFormat::Fp8E5m2) continue;
    SCOPED_TRACE(std::string(f.precision) + (f.block2d ? " 16x16" : ""));
    const Input& in = f.block2d ? smaller : small;
    const auto& xf = in.xf;
    const auto& dx = in.dx;
    cpu::QuantizedTensor q = cpu_tensor(f, rows, cols);
    cpu::quantize(xf.data(), q, {false, false, 1});
    bool overflowing = false;  // the case the test is for
    for (std::int64_t s = 0; s < q.scale_count(); ++s) {
      const std::uint8_t b = static_cast<const std::uint8_t*>(q.scales.data())[s];
      const float scale = f.gpu == cuda::QuantFormat::Mxfp4
                              ? std::ldexp(1.0f, int(b) - 127)
                              : float(numfmt::decode_small(b, numfmt::kE4M3)) * q.tensor_scale;
      overflowing |= scale > 0 && std::isinf(1.0f / scale);
    }
    EXPECT_EQ(overflowing, f.gpu != cuda::QuantFormat::Mxfp4);
    GpuQuantized g(f.gpu, rows, cols);
    cuda::quantize_bf16(dx.p, g.ref(), rows, cols, f.gpu, {false, false, 1}, g.workspace.p, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::size_t nc = cuda::quant_code_bytes(f.gpu, rows, cols),
                      ns = cuda::quant_scale_bytes(f.gpu, rows, cols);
    const auto* qc = static_cast<const std::uint8_t*>(q.values.data());
    const auto* qs = static_cast<const std::uint8_t*>(q.scales.data());
    EXPECT_EQ(g.codes.host(nc), std::vector<std::uint8_t>(qc, qc + nc));
    EXPECT_EQ(g.scales.host(ns), std::vector<std::uint8_t>(qs, qs + ns));
  }
}

std::vector<std::uint8_t> bytes_of(const rafter::workloads::cpu::Buffer& b, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(b.data());
  return {p, p + n};
}

// x (rows × cols, row-major) transposed: cols × rows.
std::vector<float> transposed(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<float> xt(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) xt[std::size_t(c * rows + r)] = x[std::size_t(r * cols + c)];
  return xt;
}

// The CPU encoder's two copies of a rows × cols tensor in format f, allocated: q row-wise, qt the
// column-wise one (cols × rows).
struct CpuCopies {
  cpu::QuantizedTensor q, qt;
  CpuCopies(const Format& f, std::int64_t rows, std::int64_t cols)
      : q(cpu_tensor(f, rows, cols)), qt(cpu_tensor(f, cols, rows)) {}
};

// transpose=1: the row-wise copy (never transformed) and the column-wise copy (Xᵀ, its blocks along
// rows, the RHT where asked) from one encoding pass equal the CPU encoder's on X and on Xᵀ, byte for
// byte. 96 × 320: partial 64×64 tiles in both directions.
TEST_F(GpuQuant, BothCopiesFromOnePassEqualTheCpuEncoder) {
  const std::int64_t rows = 96, cols = 320;
  const Input in(rows, cols, 11);
  ASSERT_FALSE(HasFailure());  // the upload
  const auto& xf = in.xf;
  const auto& dx = in.dx;
  const std::vector<float> xt = transposed(xf, rows, cols);
  for (const Format& f : kFormats)
    for (bool rht : {false, true}) {
      SCOPED_TRACE(std::string(f.precision) + (f.block2d ? " 16x16" : "") + (rht ? " rht" : ""));
      CpuCopies cpu_copies(f, rows, cols);
      auto &q = cpu_copies.q, &qt = cpu_copies.qt;
      cpu::quantize(xf.data(), q, {false, false, 1});
      cpu::quantize(xt.data(), qt, {rht, false, 1});
      GpuQuantized g(f.gpu, rows, cols), gt(f.gpu, cols, rows);
      const cuda::QuantTensorRef t = gt.ref();
      cuda::quantize_bf16(dx.p, g.ref(), rows, cols, f.gpu, {rht, false, 1}, g.workspace.p, nullptr, &t);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::size_t nc = cuda::quant_code_bytes(f.gpu, rows, cols),
                        ns = cuda::quant_scale_bytes(f.gpu, rows, cols);
      EXPECT_EQ(g.codes.host(nc), bytes_of(q.values, nc)) << "row-wise codes";
      EXPECT_EQ(gt.codes.host(nc), bytes_of(qt.values, nc)) << "column-wise codes";
      if (ns) {
        EXPECT_EQ(g.scales.host(ns), bytes_of(q.scales, ns)) << "row-wise scales";
        EXPECT_EQ(gt.scales.host(ns), bytes_of(qt.scales, ns)) << "column-wise scales";
      }
      if (f.gpu != cuda::QuantFormat::Mxfp4) {
        EXPECT_EQ(g.tensor_scale.host(1)[0], q.tensor_scale);
        EXPECT_EQ(gt.tensor_scale.host(1)[0], qt.tensor_scale);
      }
    }
  // Whole blocks along rows: 48 rows are not whole MXFP4 blocks of 32.
  GpuQuantized g(cuda::QuantFormat::Mxfp4, 48, 64), gt(cuda::QuantFormat::Mxfp4, 64, 48);
  const cuda::QuantTensorRef t = gt.ref();
  EXPECT_THROW(
      cuda::quantize_bf16(dx.p, g.ref(), 48, 64, cuda::QuantFormat::Mxfp4, {}, g.workspace.p, nullptr, &t),
      rafter::InputError);
}

// The FP4 encoders take the RHT's × 1/4 in each block's reciprocal where the block's maximum lies in
// [2^-100, 2^100] (encode16), and scale every value elsewhere: blocks of both kinds (inputs times
// 2^-118 and 2^100), row-wise and in the column-wise copy, equal the CPU encoder byte for byte.
TEST_F(GpuQuant, RhtBlocksOfExtremeMagnitudeEqualTheCpuEncoder) {
  const std::int64_t rows = 64, cols = 384;
  for (const int shift : {-118, 100}) {
    const Input in(rows, cols, 9, shift);
    ASSERT_FALSE(HasFailure());  // the upload
    const std::vector<float> xt = transposed(in.xf, rows, cols);
    for (const Format* f : {&kFormats[0], &kFormats[2]}) {
      SCOPED_TRACE(std::string(f->precision) + " shift " + std::to_string(shift));
      CpuCopies cpu_copies(*f, rows, cols);
      auto &q = cpu_copies.q, &qt = cpu_copies.qt;
      cpu::QuantizedTensor qr = cpu_tensor(*f, rows, cols);  // the row-wise copy with the RHT
      cpu::quantize(in.xf.data(), q, {false, false, 1});
      cpu::quantize(in.xf.data(), qr, {true, false, 1});
      cpu::quantize(xt.data(), qt, {true, false, 1});
      GpuQuantized g(f->gpu, rows, cols), gr(f->gpu, rows, cols), gt(f->gpu, cols, rows);
      const cuda::QuantTensorRef t = gt.ref();
      cuda::quantize_bf16(in.dx.p, gr.ref(), rows, cols, f->gpu, {true, false, 1}, gr.workspace.p, nullptr);
      cuda::quantize_bf16(in.dx.p, g.ref(), rows, cols, f->gpu, {true, false, 1}, g.workspace.p, nullptr, &t);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::size_t nc = cuda::quant_code_bytes(f->gpu, rows, cols),
                        ns = cuda::quant_scale_bytes(f->gpu, rows, cols);
      EXPECT_EQ(gr.codes.host(nc), bytes_of(qr.values, nc)) << "row-wise codes, RHT";
      EXPECT_EQ(gr.scales.host(ns), bytes_of(qr.scales, ns)) << "row-wise scales, RHT";
      EXPECT_EQ(g.codes.host(nc), bytes_of(q.values, nc)) << "row-wise codes beside the copy";
      EXPECT_EQ(gt.codes.host(nc), bytes_of(qt.values, nc)) << "column-wise codes, RHT";
      EXPECT_EQ(gt.scales.host(ns), bytes_of(qt.scales, ns)) << "column-wise scales, RHT";
    }
  }
}

// Inputs whose block scales are exact (each 1×16 block holds ±2^-j, the tensor's amax is 1), so
// that no value lies beyond 6 block scales and stochastic rounding has nothing to clip: then its
// expectation is the input itself.
TEST_F(GpuQuant, StochasticRoundingIsUnbiased) {
  const std::int64_t rows = 64, cols = 1024;
  const int draws = 64;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<std::uint16_t> x(std::size_t(rows * cols));
  std::vector<double> xd(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double mag = std::ldexp(1.0, -int((i / 16) % 4));
    const double v = i % 16 == 3 ? (u(rng) < 0 ? -mag : mag) : u(rng) * mag;
    x[i] = numfmt::float_to_bf16(static_cast<float>(v));
    xd[i] = numfmt::bf16_to_float(x[i]);
  }
  Dev<__nv_bfloat16> dx(x.size());
  ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  GpuQuantized g(cuda::QuantFormat::Nvfp4, rows, cols);
  Dev<float> y(x.size());
  auto run = [&](bool sr, std::uint64_t seed) {
    cuda::quantize_bf16(dx.p, g.ref(), rows, cols, cuda::QuantFormat::Nvfp4, {false, sr, seed}, g.workspace.p,
                        nullptr);
    cuda::dequantize_to_f32(g.ref(), y.p, rows, cols, cuda::QuantFormat::Nvfp4, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return y.host(x.size());
  };
  const auto rn = run(false, 0);
  std::vector<double> mean(x.size(), 0.0);
  std::vector<float> first;
  for (int d = 0; d < draws; ++d) {
    const auto s = run(true, 1000 + d);
    if (d == 0) first = s;
    for (std::size_t i = 0; i < s.size(); ++i) mean[i] += s[i] / draws;
  }
  double rn_abs = 0, rn2 = 0, mean2 = 0, signed_sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    rn_abs += std::fabs(rn[i] - xd[i]);
    rn2 += (rn[i] - xd[i]) * (rn[i] - xd[i]);
    mean2 += (mean[i] - xd[i]) * (mean[i] - xd[i]);
    signed_sum += (mean[i] - xd[i]) * (xd[i] < 0 ? -1 : 1);
  }
  const double rms_ratio = std::sqrt(mean2 / rn2), bias = std::fabs(signed_sum) / rn_abs;
  std::printf(
      "SR over %d draws: rms(mean - x) / rms(RN - x) = %.4f (1/sqrt(draws) scale), "
      "|sum(mean - x)·sign(x)| / sum|RN - x| = %.2e\n",
      draws, rms_ratio, bias);
  EXPECT_LT(rms_ratio, 0.35);         // ~0.2 expected at 64 draws; a biased rounding stays near 1
  EXPECT_LT(bias, 0.01);              // ~1e-3 of noise expected; rounding always down would give ~1
  EXPECT_EQ(run(true, 1000), first);  // the same seed draws the same codes
  EXPECT_NE(run(true, 1001), first);
}

// One workspace through a sequence of calls whose amax goes down, to zero and up again, in every
// form of amax pass (plain, with the RHT, both copies with and without the column-wise RHT) and with
// MXFP4 calls between them (no amax pass): each call's tensor scales (outputs poisoned first), block
// scales and codes equal the CPU encoder's on that call's input. State left over from an earlier
// call (the amax pass's counter or a maximum) would give a later, smaller tensor its scale.
TEST_F(GpuQuant, EachCallOfASharedWorkspaceFindsItsOwnTensorScale) {
  const std::int64_t rows = 64, cols = 384;
  const Input big(rows, cols, 3, 4), mid(rows, cols, 4), small(rows, cols, 5, -9);
  Input zero(rows, cols, 6);
  zero.x.assign(zero.x.size(), 0);
  zero.xf.assign(zero.xf.size(), 0.0f);
  ASSERT_EQ(cudaMemset(zero.dx.p, 0, zero.x.size() * 2), cudaSuccess);
  ASSERT_FALSE(HasFailure());  // the uploads
  Dev<std::uint8_t> workspace(cuda::quant_workspace_bytes());
  ASSERT_EQ(cudaMemset(workspace.p, 0, cuda::quant_workspace_bytes()), cudaSuccess);
  struct Call {
    const Input* in;
    const Format* f;
    bool rht, both;
  };
  const Format &nv = kFormats[0], &tile = kFormats[1], &mx = kFormats[2], &e4 = kFormats[3],
               &e5 = kFormats[4];
  const Call calls[] = {
      {&big, &nv, false, false},    {&small, &nv, false, false}, {&zero, &tile, false, false},
      {&mid, &e4, false, false},    {&mid, &mx, false, false},   {&small, &e5, false, false},
      {&big, &nv, true, true},      {&small, &nv, true, true},   {&mid, &mx, false, true},
      {&small, &tile, false, true}, {&zero, &e4, false, true},   {&big, &tile, true, false},
      {&small, &nv, true, false},   {&mid, &e4, false, true}};
  int i = 0;
  for (const Call& c : calls) {
    const Format& f = *c.f;
    SCOPED_TRACE("call " + std::to_string(i++) + ": " + f.precision + (f.block2d ? " 16x16" : "") +
                 (c.rht ? " rht" : "") + (c.both ? " both copies" : ""));
    const std::vector<float> xt = transposed(c.in->xf, rows, cols);
    CpuCopies cpu_copies(f, rows, cols);
    auto &q = cpu_copies.q, &qt = cpu_copies.qt;
    // Both copies: the row-wise copy is never transformed, the column-wise one takes the RHT.
    cpu::quantize(c.in->xf.data(), q, {c.rht && !c.both, false, 1});
    cpu::quantize(xt.data(), qt, {c.rht, false, 1});
    GpuQuantized g(f.gpu, rows, cols), gt(f.gpu, cols, rows);
    ASSERT_EQ(cudaMemset(g.tensor_scale.p, 0xff, 4), cudaSuccess);  // NaN until written
    ASSERT_EQ(cudaMemset(gt.tensor_scale.p, 0xff, 4), cudaSuccess);
    const cuda::QuantTensorRef t = gt.ref();
    cuda::quantize_bf16(c.in->dx.p, g.ref(), rows, cols, f.gpu, {c.rht, false, 1}, workspace.p, nullptr,
                        c.both ? &t : nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::size_t nc = cuda::quant_code_bytes(f.gpu, rows, cols),
                      ns = cuda::quant_scale_bytes(f.gpu, rows, cols);
    EXPECT_EQ(g.codes.host(nc), bytes_of(q.values, nc)) << "row-wise codes";
    if (ns) {
      EXPECT_EQ(g.scales.host(ns), bytes_of(q.scales, ns)) << "row-wise scales";
    }
    if (c.both) {
      EXPECT_EQ(gt.codes.host(nc), bytes_of(qt.values, nc)) << "column-wise codes";
      if (ns) {
        EXPECT_EQ(gt.scales.host(ns), bytes_of(qt.scales, ns)) << "column-wise scales";
      }
    }
    if (f.gpu == cuda::QuantFormat::Mxfp4) continue;
    EXPECT_EQ(g.tensor_scale.host(1)[0], q.tensor_scale);
    if (c.both) {
      EXPECT_EQ(gt.tensor_scale.host(1)[0], qt.tensor_scale);
    }
  }
}

TEST_F(GpuQuant, BadShapesAreInputErrors) {
  GpuQuantized g(cuda::QuantFormat::Mxfp4, 16, 64);
  EXPECT_THROW(
      cuda::quantize_bf16(nullptr, g.ref(), 16, 48, cuda::QuantFormat::Mxfp4, {}, g.workspace.p, nullptr),
      rafter::InputError);
  EXPECT_THROW(cuda::quantize_bf16(nullptr, g.ref(), 8, 64, cuda::QuantFormat::Nvfp4Tile16, {}, g.workspace.p,
                                   nullptr),
               rafter::InputError);
}

}  // namespace

#else
TEST(GpuQuant, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
