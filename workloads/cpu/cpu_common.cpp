// Host tensors, the kernel registry and the pinned thread pool of the CPU backend.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fmt/format.h>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include "avx512_kernels.hpp"
#include "cpu_kernel.hpp"
#include "rafter/collector/cpu_isa.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::workloads::cpu {

std::size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::F64: return 8;
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::S32: return 4;
    case DType::U8: return 1;
  }
  return 1;
}

DType activation_dtype(std::string_view precision) {
  if (precision == "fp32") return DType::F32;
  if (precision == "bf16") return DType::BF16;
  if (precision == "fp16") return DType::F16;
  throw InputError(fmt::format("the CPU kernels store activations in fp32, bf16 or fp16, not {}", precision));
}

bool cpu_has_avx2() {
  // RAFTER_CPU_ISA=sse4.1 or scalar: the baseline builds of the kernel files, as on a CPU without AVX2.
  static const bool has =
      cpu_isa_allowed(CpuIsa::Avx2) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

bool avx512::available() {
  // RAFTER_CPU_ISA below avx512 keeps the AVX2 or baseline loops (to test or compare them here).
  static const bool has = cpu_isa_allowed(CpuIsa::Avx512) && cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16");
  return has;
}

bool is_activation_precision(const OpInstance& inst) {
  return inst.precision == "fp32" || inst.precision == "bf16" || inst.precision == "fp16";
}

Buffer::Buffer(std::size_t bytes) : bytes_(bytes) {
  // Large tensors on 2 MiB pages where the kernel gives them (transparent huge pages in `madvise`
  // mode, Debian's default, need the advice): 4 KiB pages cost a TLB miss every 4 KiB of every
  // stream.
  // Each such tensor starts a different multiple of 68 KiB into its first huge page: tensors that
  // all began on a 2 MiB boundary would put element i of every stream into the same cache sets and
  // DRAM banks (measured: softmax 8192×8192 at ~18 GB/s without the stagger, ~25 with it).
  constexpr std::size_t kHuge = std::size_t(2) << 20, kStagger = 17 * 4096;
  static std::atomic<unsigned> huge_count{0};
  const bool huge = bytes >= 2 * kHuge;
  const std::size_t align = huge ? kHuge : 64;
  const std::size_t offset = huge ? (huge_count++ % 16) * kStagger : 0;
  const std::size_t rounded = (std::max<std::size_t>(bytes, 64) + 63) / 64 * 64;
  const std::size_t total = (rounded + offset + align - 1) / align * align;
  base_ = std::aligned_alloc(align, total);
  if (!base_) throw InputError(fmt::format("cannot allocate {} bytes", bytes));
#ifdef MADV_HUGEPAGE
  if (huge) madvise(base_, total, MADV_HUGEPAGE);  // advice only: a refusal changes nothing
#endif
  ptr_ = static_cast<unsigned char*>(base_) + offset;
  auto* p = static_cast<unsigned char*>(ptr_);
  parallel_for(static_cast<std::int64_t>(rounded / 4096 + 1), [&](std::int64_t b, std::int64_t e, int) {
    const std::size_t lo = std::size_t(b) * 4096, hi = std::min(rounded, std::size_t(e) * 4096);
    if (lo < hi) std::memset(p + lo, 0, hi - lo);
  });
}
Buffer::~Buffer() { std::free(base_); }
Buffer::Buffer(Buffer&& o) noexcept : base_(o.base_), ptr_(o.ptr_), bytes_(o.bytes_) {
  o.base_ = nullptr;
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  std::swap(base_, o.base_);
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

std::size_t Tensor::size() const {
  std::size_t n = 1;
  for (auto d : dims) n *= static_cast<std::size_t>(d);
  return n;
}

void Tensor::allocate() { buffer = Buffer(size() * dtype_bytes(dtype)); }

namespace {
void store(Tensor& t, std::size_t i, double v) {
  switch (t.dtype) {
    case DType::F64: t.as<double>()[i] = v; break;
    case DType::F32: t.as<float>()[i] = static_cast<float>(v); break;
    case DType::BF16: t.as<bf16>()[i] = numfmt::float_to_bf16(static_cast<float>(v)); break;
    // via fp32: the double rounding (rare, one fp16 ulp at most) is far below fp16's tolerance.
    case DType::F16: t.as<f16>()[i].bits = numfmt::float_to_fp16(static_cast<float>(v)); break;
    case DType::S32: t.as<std::int32_t>()[i] = static_cast<std::int32_t>(v); break;
    case DType::U8: t.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(v); break;
  }
}
}  // namespace

void Tensor::fill_random(std::uint64_t seed) {
  if (!buffer.data()) allocate();
  const std::int64_t n = static_cast<std::int64_t>(size());
  // splitmix64 per element: large tensors fill fast (a model step allocates gigabytes).
  const double span = hi - lo;
  parallel_for(n, [&](std::int64_t b, std::int64_t e, int) {
    for (std::int64_t i = b; i < e; ++i) {
      std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + std::uint64_t(i) * 0xD1B54A32D192ED03ull;
      x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
      x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
      x ^= x >> 31;
      const double v = lo + span * double(x >> 11) * (1.0 / 9007199254740992.0);
      store(*this, std::size_t(i), dtype == DType::S32 ? std::floor(v) : v);
    }
  }, 4096);
}

void Tensor::fill_from(const std::vector<double>& values) {
  if (!buffer.data()) allocate();
  if (values.size() != size()) throw InputError(fmt::format("tensor {}: {} values for {} elements", name, values.size(), size()));
  for (std::size_t i = 0; i < values.size(); ++i) store(*this, i, values[i]);
}

std::vector<double> Tensor::to_double() const {
  std::vector<double> out(size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    switch (dtype) {
      case DType::F64: out[i] = as<double>()[i]; break;
      case DType::F32: out[i] = as<float>()[i]; break;
      case DType::BF16: out[i] = numfmt::bf16_to_float(as<bf16>()[i]); break;
      case DType::F16: out[i] = numfmt::fp16_to_float(as<f16>()[i].bits); break;
      case DType::S32: {
        const auto v = as<std::int32_t>()[i];
        out[i] = v == std::numeric_limits<std::int32_t>::min() ? NAN : double(v);
        break;
      }
      case DType::U8: out[i] = as<std::uint8_t>()[i]; break;
    }
  }
  return out;
}

void Tensor::poison() {
  if (!buffer.data()) allocate();
  for (std::size_t i = 0; i < size(); ++i) {
    if (dtype == DType::S32) as<std::int32_t>()[i] = std::numeric_limits<std::int32_t>::min();
    else if (dtype == DType::U8) as<std::uint8_t>()[i] = 0xff;
    else store(*this, i, NAN);
  }
}

std::vector<std::vector<double>> Kernel::results() const {
  std::vector<std::vector<double>> out;
  for (const auto& t : outputs) out.push_back(t.to_double());
  return out;
}

std::vector<KernelEntry>& kernel_registry() {
  static std::vector<KernelEntry> registry;
  return registry;
}
bool register_kernel(KernelEntry e) {
  kernel_registry().push_back(std::move(e));
  return true;
}
const KernelEntry* find_kernel(std::string_view backend, const OpInstance& inst) {
  for (const auto& e : kernel_registry())
    if (e.backend == backend && e.op == inst.op && e.supports(inst)) return &e;
  return nullptr;
}

}  // namespace rafter::workloads::cpu
