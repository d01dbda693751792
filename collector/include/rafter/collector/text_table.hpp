// Console output shared by every verb: numbers with SI prefixes to a given number of significant
// digits, and plain-text tables whose columns are as wide as their widest cell.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace rafter {

// "1.775 PFLOP/s" (significant = 4), "812 ns", "-" for NaN/inf. Prefixes a … E; µ for micro.
std::string format_si(double v, std::string_view unit, int significant = 3);

// Rows of cells; the first row is the header. Columns are separated by two spaces and sized from
// their content (UTF-8 code points); the first column is left-aligned, the rest right-aligned
// unless `left_columns` names them (0-based) as left-aligned too. Trailing blanks are trimmed.
std::string format_text_table(const std::vector<std::vector<std::string>>& rows,
                              const std::vector<std::size_t>& left_columns = {});

}  // namespace rafter
