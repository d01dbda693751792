// The AdamW hyper-parameters used by the adamw operator's reference and every backend, so that
// the correctness check compares like with like.
#pragma once

namespace rafter::workloads {

struct AdamwHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  int step = 10;
};

}  // namespace rafter::workloads
