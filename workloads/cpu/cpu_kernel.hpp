// The CPU backend's building blocks: host tensors in their storage type (fp64, fp32, bf16, fp16, int),
// a pinned thread pool (hwloc), a kernel interface bound to one operator instance, and the
// registry through which kernel files declare what they run. Private to workloads/cpu.
#pragma once
#include <type_traits>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rafter/collector/thread_pool.hpp"
#include "rafter/workloads/formats.hpp"
#include "rafter/workloads/operator.hpp"

namespace rafter::workloads::cpu {

using bf16 = std::uint16_t;
// IEEE binary16 storage: a type of its own (not another uint16_t) so that ld/st and the kernels'
// overloads tell it from bf16.
struct f16 {
  std::uint16_t bits;
};
static_assert(sizeof(f16) == 2 && alignof(f16) == 2);

enum class DType { F64, F32, BF16, F16, S32, U8 };
std::size_t dtype_bytes(DType t);
// Storage dtype of an activation precision ("fp32" → F32, "bf16" → BF16, "fp16" → F16); throws
// otherwise.
DType activation_dtype(std::string_view precision);
// Storage dtype of a kernel's element type (float, the bf16 or the f16 storage type).
template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>);
  return std::is_same_v<T, float> ? DType::F32 : std::is_same_v<T, f16> ? DType::F16 : DType::BF16;
}
// Whether the hand-written AVX-512 row kernels (avx512_kernels.hpp) take this element type: all
// three storage types (fp16 by AVX-512F's vcvtph2ps/vcvtps2ph; the bf16-only fast paths inside
// them stay bf16's).
template <class T>
inline constexpr bool has_avx512_rows = std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

// 64-byte aligned storage, first touched by the pool's threads (pages land where they are used).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t bytes);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* base_ = nullptr;  // what aligned_alloc returned (ptr_ may start further on)
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> dims;
  double lo = -1, hi = 1;  // range of random values (S32: integers in [lo, hi))
  Buffer buffer;

  std::size_t size() const;
  void allocate();
  void fill_random(std::uint64_t seed);
  void fill_from(const std::vector<double>& values);
  std::vector<double> to_double() const;
  void poison();  // NaN (floats) or INT32_MIN (ints, decoded as NaN)
  template <class T>
  T* as() const { return static_cast<T*>(buffer.data()); }
};

inline Tensor make_tensor(std::string name, DType dtype, std::vector<std::int64_t> dims, double lo = -1,
                          double hi = 1) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.lo = lo;
  t.hi = hi;
  return t;
}

// One operator instance ready to run: declares its tensors in the constructor, may derive data
// from the inputs in prepare() (quantized operands, tables, in-place copies), runs in run().
class Kernel {
 public:
  virtual ~Kernel() = default;
  std::vector<Tensor> inputs, outputs;
  std::string emulated_via;                              // set when the precision is emulated
  nlohmann::json details = nlohmann::json::object();     // algorithm, library, ...
  virtual void poison() {  // before the check: a kernel that forgets an output fails it
    for (auto& t : outputs) t.poison();
  }
  virtual void prepare() {}
  virtual void run() = 0;
  virtual std::vector<std::vector<double>> results() const;
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const OpInstance&)>;
struct KernelEntry {
  std::string op;
  std::string backend;  // "cpu.native" or "cpu.onednn"
  std::function<bool(const OpInstance&)> supports;
  KernelFactory make;
};
std::vector<KernelEntry>& kernel_registry();
bool register_kernel(KernelEntry e);
const KernelEntry* find_kernel(std::string_view backend, const OpInstance& inst);

// Thread pool (collector's cpu_pool): workers pinned one per core (hwloc); the calling thread is
// worker 0.
inline int pool_threads() { return cpu_pool::threads(); }
inline void set_pool_threads(int n) { cpu_pool::set_threads(n); }  // 0 = all cores
// Splits [0, n) into contiguous chunks, one per worker; fn(begin, end, worker). `grain` is the
// fewest items worth a thread of their own: tiny calls stay on the caller (no wake-up latency).
inline void parallel_for(std::int64_t n, const cpu_pool::Job& fn, std::int64_t grain = 1) {
  cpu_pool::parallel_for(n, fn, grain);
}
// Items per thread for row-wise kernels so that a thread gets at least ~64 KiB of work.
inline std::int64_t row_grain(std::int64_t row_elements) { return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, row_elements)); }

// Storage access: fp32 arithmetic on fp32, bf16 or fp16 storage.
static inline float ld(const float* p, std::int64_t i) { return p[i]; }
static inline float ld(const bf16* p, std::int64_t i) {
  const std::uint32_t u = static_cast<std::uint32_t>(p[i]) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
static inline void st(float* p, std::int64_t i, float v) { p[i] = v; }
static inline void st(bf16* p, std::int64_t i, float v) {  // round to nearest even (finite values)
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  p[i] = static_cast<bf16>(u >> 16);
}
// fp16: exact widening; narrowing rounds to nearest even with subnormals, inf and NaN (formats.hpp).
static inline float ld(const f16* p, std::int64_t i) { return numfmt::fp16_to_float(p[i].bits); }
static inline void st(f16* p, std::int64_t i, float v) { p[i].bits = numfmt::float_to_fp16(v); }

// exp for fp32 kernels: 2^n · p(r) with a degree-6 polynomial, relative error < 2e-7 for
// x in [-87, 88]; below that it returns a tiny positive number (< 1e-28) instead of 0, above it
// a large finite one. The exponent is clamped as an integer: integer min/max vectorize, while
// float compares (which may trap) keep the compiler from vectorizing. |x| must stay < 1e9.
static inline float fast_exp(float x) {
  // Round to nearest by the 1.5·2^23 trick (vectorizes on plain SSE2, unlike nearbyint).
  const float n0 = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  std::int32_t ni = static_cast<std::int32_t>(n0);
  ni = ni < -126 ? -126 : ni;
  ni = ni > 127 ? 127 : ni;
  const float n = static_cast<float>(ni);
  const float r = x - n * 0.693145751953125f - n * 1.42860682030941723212e-6f;
  float p = 1.388888889e-3f;
  p = p * r + 8.333333333e-3f;
  p = p * r + 4.166666667e-2f;
  p = p * r + 1.666666667e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (ni + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// Row reductions with 16 independent lanes: without -ffast-math the compiler may not reorder a
// single float accumulator, so these are written lane-wise to vectorize. (static: the kernel files
// are compiled with different ISA flags and must not share one out-of-line copy.)
template <class T>
static inline float sum_squares(const T* x, std::int64_t n) {
  float acc[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += ld(x, i + j) * ld(x, i + j);
  float s = 0;
  for (; i < n; ++i) s += ld(x, i) * ld(x, i);
  for (float a : acc) s += a;
  return s;
}
template <class A, class B>
static inline float dot(const A* a, const B* b, std::int64_t n) {
  float acc[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += ld(a, i + j) * ld(b, i + j);
  float s = 0;
  for (; i < n; ++i) s += ld(a, i) * ld(b, i);
  for (float v : acc) s += v;
  return s;
}
// Max as a signed-integer max over an order-preserving transform of the float bits (an integer
// max reduction vectorizes without -ffast-math; a float one does not). Finite inputs.
static inline std::int32_t float_order_key(float v) {
  std::int32_t s;
  std::memcpy(&s, &v, 4);
  return s ^ ((s >> 31) & 0x7fffffff);
}
template <class T>
static inline float row_max(const T* x, std::int64_t n, float scale = 1.0f) {
  std::int32_t m = float_order_key(-INFINITY);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t k = float_order_key(ld(x, i) * scale);
    m = m > k ? m : k;
  }
  const std::int32_t s = m ^ ((m >> 31) & 0x7fffffff);
  float r;
  std::memcpy(&r, &s, 4);
  return r;
}
// Σ exp(x·scale − mx)
template <class T>
static inline float sum_exp(const T* x, std::int64_t n, float mx, float scale = 1.0f) {
  // 64 lanes: 8 AVX2 vectors in flight hide the latency of exp's FMA chain.
  float acc[64] = {};
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 64; ++j) acc[j] += fast_exp(ld(x, i + j) * scale - mx);
  float s = 0;
  for (; i < n; ++i) s += fast_exp(ld(x, i) * scale - mx);
  for (float a : acc) s += a;
  return s;
}

// AVX2 + FMA present and allowed (RAFTER_CPU_ISA, rafter/collector/cpu_isa.hpp).
bool cpu_has_avx2();

// Twin builds. Every *_avx2.cpp kernel file is compiled twice (cmake/RafterTargets.cmake): as it
// is, its kernels between RAFTER_CPU_KERNELS_BEGIN and _END built for AVX2 + FMA, and as a
// baseline x86-64 twin (RAFTER_CPU_BASELINE defined: no pragma, plain SSE2). Each build registers
// its kernels only where it is the one to run (kernel_build_runs_here), so every operator has a
// native kernel on every x86-64 CPU.
// Why a pragma after the includes rather than -mavx2 on the command line: with the flag, every
// inline function and template instantiated in the file (std::vector, std::function, nlohmann::json,
// the Tensor helpers above) is compiled for AVX2 too, and the linker keeps one copy of each for the
// whole program, possibly that one: a CPU without AVX2 then faults in code that has nothing to do
// with the kernels (seen: the AVX2 objects' copies of json and vector constructors, and their
// static initializers, held VEX instructions). Under the pragma only what is defined inside the
// region gets AVX2; templates from headers keep the target of their definition. So: inside the
// region, only internal linkage (anonymous namespace) or functions of the build's own namespace
// (RAFTER_CPU_BUILD); registrations after RAFTER_CPU_KERNELS_END. tests/isa/check_dispatch.py
// checks the built libraries for exactly this.
#ifdef RAFTER_CPU_BASELINE
#define RAFTER_CPU_KERNELS_BEGIN
#define RAFTER_CPU_KERNELS_END
#define RAFTER_CPU_BUILD baseline_build
static inline bool kernel_build_runs_here() { return !cpu_has_avx2(); }
#elif defined(__clang__)
// Clang has no `#pragma GCC target`; its attribute pragma gives each function defined in the
// region the same target, with the same scope (the fuzz build, RAFTER_FUZZ, is clang's).
#define RAFTER_CPU_KERNELS_BEGIN \
  _Pragma("clang attribute push (__attribute__((target(\"avx2,fma\"))), apply_to = function)")
#define RAFTER_CPU_KERNELS_END _Pragma("clang attribute pop")
#define RAFTER_CPU_BUILD avx2_build
static inline bool kernel_build_runs_here() { return cpu_has_avx2(); }
#else
#define RAFTER_CPU_KERNELS_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define RAFTER_CPU_KERNELS_END _Pragma("GCC pop_options")
#define RAFTER_CPU_BUILD avx2_build
static inline bool kernel_build_runs_here() { return cpu_has_avx2(); }
#endif

// Dispatches a kernel template over fp32 / bf16 / fp16 storage. static: GCC 12 gives an instance of
// a function template weak linkage even when its template-template argument lives in an anonymous
// namespace, so the two builds of a kernel file (see "Twin builds") made one
// make_typed<_GLOBAL__N_1::GlaKernel> for both, and the linker kept the AVX2 build's (seen: the
// baseline registration built AVX2 kernels under RAFTER_CPU_ISA=sse4.1).
template <template <class> class K>
static std::unique_ptr<Kernel> make_typed(const OpInstance& inst) {
  switch (activation_dtype(inst.precision)) {
    case DType::F32: return std::make_unique<K<float>>(inst);
    case DType::F16: return std::make_unique<K<f16>>(inst);
    default: return std::make_unique<K<bf16>>(inst);
  }
}
bool is_activation_precision(const OpInstance& inst);  // fp32, bf16 or fp16
// The registration predicate of the activation kernels: an fp32/bf16/fp16 instance, on the CPU this
// build is the one to run on.
static inline bool activation_here(const OpInstance& i) { return kernel_build_runs_here() && is_activation_precision(i); }

}  // namespace rafter::workloads::cpu

#define RAFTER_CPU_CONCAT_(a, b) a##b
#define RAFTER_CPU_CONCAT(a, b) RAFTER_CPU_CONCAT_(a, b)
#define RAFTER_REGISTER_CPU_KERNEL(...)                                                    \
  static const bool RAFTER_CPU_CONCAT(rafter_cpu_kernel_, __LINE__) [[maybe_unused]] = \
      ::rafter::workloads::cpu::register_kernel(__VA_ARGS__)
