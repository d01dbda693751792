// A kernel that writes through a null pointer: the illegal-address fault that leaves a process's
// CUDA context unusable, as an Xid error or a GPU falling off the bus would (test_cuda_faults.cpp).
#include <cuda_runtime.h>

namespace {
__global__ void write_through_null(int* p) { *static_cast<volatile int*>(p + threadIdx.x) = 1; }
}  // namespace

void corrupt_cuda_context() {
  write_through_null<<<1, 32>>>(nullptr);
  cudaDeviceSynchronize();  // returns cudaErrorIllegalAddress: the operators after this see it
}
