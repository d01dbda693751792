// Console numbers and tables: significant digits as asked (FP8 E4M3 and E5M2 at 1.775 and 1.791
// PFLOP/s must not print alike), prefixes that carry, columns sized from their content.
#include <gtest/gtest.h>

#include <sstream>

#include "rafter/collector/text_table.hpp"

TEST(TextTable, SignificantDigitsAndPrefixes) {
  EXPECT_EQ(rafter::format_si(1.775e15, "FLOP/s", 4), "1.775 PFLOP/s");
  EXPECT_EQ(rafter::format_si(1.791e15, "FLOP/s", 4), "1.791 PFLOP/s");
  EXPECT_EQ(rafter::format_si(2.89e-8, "s", 4), "28.90 ns");
  EXPECT_EQ(rafter::format_si(3.35e12, "B/s"), "3.35 TB/s");
  EXPECT_EQ(rafter::format_si(999.96e9, "B/s", 4), "1.000 TB/s");  // rounding carries into the prefix
  EXPECT_EQ(rafter::format_si(999.4e9, "B/s", 3), "999 GB/s");
  EXPECT_EQ(rafter::format_si(0, "s"), "0 s");
  EXPECT_EQ(rafter::format_si(1.5e9, ""), "1.50G");
  EXPECT_EQ(rafter::format_si(std::numeric_limits<double>::quiet_NaN(), "s"), "-");
}

TEST(TextTable, ColumnsAreAsWideAsTheirWidestCell) {
  const std::string t = rafter::format_text_table(
      {{"kind", "op", "value"}, {"compute", "wgmma.e4m3+unpack", "1.775 PFLOP/s"}, {"bandwidth", "h2d_pinned", "55 GB/s"}},
      {1});
  std::istringstream in(t);
  std::string header, row1, row2;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_EQ(header, "kind       op                         value");
  EXPECT_EQ(row1, "compute    wgmma.e4m3+unpack  1.775 PFLOP/s");
  EXPECT_EQ(row2, "bandwidth  h2d_pinned               55 GB/s");
  // No two cells ever run together: every column is separated by at least two spaces.
  EXPECT_EQ(t.find("unpack1"), std::string::npos);
}
