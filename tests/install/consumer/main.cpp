// Links the installed rafter libraries and calls into them: proves headers, libraries and config.
#include <rafter/collector/stats.hpp>
#include <rafter/collector/environment.hpp>
#include <cstdio>
#include <vector>
int main() { std::vector<double> v{3, 1, 2}; std::printf("rafter %s median %g\n", rafter::rafter_version().c_str(), rafter::summarize(v).median); }
