// The CPU thread pool every CPU operator runs on: one worker pinned per core (hwloc), the calling
// thread as worker 0, fork-join over contiguous chunks. It lives in the collector, under both the
// workloads (whose kernels run on it) and the probes (whose cpu.launch probe times its fork-join
// dispatch: the launch floor of every CPU operator time).
#pragma once
#include <cstdint>
#include <functional>

namespace rafter::cpu_pool {

using Job = std::function<void(std::int64_t begin, std::int64_t end, int worker)>;

int threads();          // workers, the caller included
int cores();            // physical cores (hwloc)
void set_threads(int n);  // 0 = one per core; workers are restarted only when the count changes
// Splits [0, n) into contiguous chunks, one per worker; fn(begin, end, worker). `grain` is the
// fewest items worth a thread of their own: tiny calls stay on the caller (no wake-up latency).
// A call from inside a job runs inline on the calling worker.
void parallel_for(std::int64_t n, const Job& fn, std::int64_t grain = 1);

}  // namespace rafter::cpu_pool
