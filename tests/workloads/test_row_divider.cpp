// The flat embedding kernel's row division (workloads/cuda/row_divider.hpp), on the host: for every
// divisor up to 5000 and a spread of larger ones, the multiply-high form gives j / d at the edges
// of the range (0, around each multiple of d, 2^31 − 1) and at random j below 2^31.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "../../workloads/cuda/row_divider.hpp"

namespace {

using rafter::workloads::cuda::row_divider;

TEST(RowDivider, EqualsIntegerDivisionBelowTwoToThe31) {
  constexpr unsigned kTop = (1u << 31) - 1;
  std::vector<unsigned> divisors;
  for (unsigned d = 1; d <= 5000; ++d) divisors.push_back(d);
  for (unsigned d :
       {8191u, 8192u, 65535u, 65536u, 65537u, 1000003u, (1u << 30) - 1, 1u << 30, (1u << 30) + 1, kTop})
    divisors.push_back(d);
  std::mt19937 rng(3);
  for (const unsigned d : divisors) {
    const auto div = row_divider(d);
    std::vector<unsigned> js = {0, 1, kTop, kTop - 1, kTop - kTop % d, kTop - kTop % d - 1};
    for (unsigned q : {1u, 2u, 3u, kTop / d})
      if (std::uint64_t(q) * d <= kTop) {
        js.push_back(q * d);
        js.push_back(q * d - 1);
        if (q * d < kTop) js.push_back(q * d + 1);
      }
    for (int i = 0; i < 64; ++i) js.push_back(rng() & kTop);
    for (const unsigned j : js) ASSERT_EQ(div.divide(j), j / d) << "j " << j << " d " << d;
  }
}

}  // namespace
