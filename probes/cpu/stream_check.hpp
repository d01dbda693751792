// Correctness of the stream kernels against a plain reference on random data, output poisoned
// first: run once per ISA before any of its kernels is timed (and by the unit tests).
#pragma once
#include <string>

#include "kernels.hpp"

namespace rafter::probes::cpu {

// Empty when every kernel of `k` matches the reference; otherwise what failed.
std::string check_stream_kernels(const StreamKernels& k, std::size_t n_doubles = 4096);

// The same for a compute kernel: its result after `iterations` against kernel.expected.
std::string check_compute_kernel(const ComputeKernel& kernel, std::int64_t iterations = 1000);

// AMX's tile products on random tiles (C = C0 + A.B, output poisoned first) against a plain
// reference, exact (small-integer BF16 values, INT8's full range): BF16 where f.amx_bf16, INT8
// where f.amx_int8. Empty when they match (or the CPU has neither); otherwise what failed.
std::string check_amx_tiles(const CpuFeatures& f, std::uint64_t seed = 1);

}  // namespace rafter::probes::cpu
