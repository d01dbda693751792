// cuDNN SDPA as one of attention_decode's kernels (cudnn_attention.cpp; defined only where cuDNN and
// its frontend were found, RAFTER_HAVE_CUDNN): cuda.decode (decode_attention_backend.cpp) times it
// beside our split-KV kernel on the same tensors.
#pragma once
#include <cstdint>

#include "device_problem.hpp"
#include "kernels.hpp"

namespace rafter::workloads::cuda {

// A decode step's tensors: Q and O [batch, heads, head_dim] (one token), K and V
// [batch, kv_len, kv_heads, head_dim], all BF16.
struct DecodeTensors {
  const bf16 *q, *k, *v;
  bf16* o;
};

bool cudnn_decode_supports(std::int64_t head_dim);
// cuDNN SDPA's forward with a query length of 1 on `t`; the graph is built once per shape and cached.
// Throws InputError when cuDNN refuses the shape. `details` (if set): plan, workspace, versions.
StreamFn bind_cudnn_decode(const DecodeTensors& t, std::int64_t batch, std::int64_t kv_len,
                           std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, DeviceProblem& d,
                           nlohmann::json* details);

}  // namespace rafter::workloads::cuda
