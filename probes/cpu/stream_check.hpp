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

}  // namespace rafter::probes::cpu
