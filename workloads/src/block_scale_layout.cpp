// Row-major block scales ↔ cuBLASLt's tiled 128×4 layout (see block_scale_layout.hpp).
#include "block_scale_layout.hpp"

#include <string>

#include "rafter/collector/error.hpp"

namespace rafter::workloads::detail {
namespace {
std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

void check_size(std::size_t got, std::size_t want, const char* what) {
  if (got != want)
    throw InputError(std::string("block scale layout: ") + what + " holds " + std::to_string(got) +
                     " bytes, expected " + std::to_string(want));
}
}  // namespace

std::vector<std::uint8_t> to_block_scale_layout(const std::vector<std::uint8_t>& row_major, std::int64_t rows,
                                                std::int64_t cols, std::uint8_t pad) {
  const BlockScaleLayout l{rows, cols};
  check_size(row_major.size(), sz(rows * cols), "the row-major scale matrix");
  std::vector<std::uint8_t> tiled(l.bytes(), pad);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) tiled[l.offset(r, c)] = row_major[sz(r * cols + c)];
  return tiled;
}

std::vector<std::uint8_t> from_block_scale_layout(const std::vector<std::uint8_t>& tiled, std::int64_t rows,
                                                  std::int64_t cols) {
  const BlockScaleLayout l{rows, cols};
  check_size(tiled.size(), l.bytes(), "the tiled scale tensor");
  std::vector<std::uint8_t> row_major(sz(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) row_major[sz(r * cols + c)] = tiled[l.offset(r, c)];
  return row_major;
}

}  // namespace rafter::workloads::detail
