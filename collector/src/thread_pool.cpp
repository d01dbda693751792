// The CPU thread pool (see thread_pool.hpp): workers pinned one per core through hwloc, woken per
// job under a mutex; the caller is worker 0 and runs its own share.
#include "rafter/collector/thread_pool.hpp"

#include <hwloc.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace rafter::cpu_pool {

namespace {

class Pool {
 public:
  static Pool& get() {
    static Pool pool;
    return pool;
  }
  int threads() const { return threads_; }
  int cores() const { return std::max(1, hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_CORE)); }
  void resize(int n) {
    stop_workers();
    start(n);
  }
  void run(std::int64_t n, const Job& fn, std::int64_t grain) {
    const int t = static_cast<int>(std::min<std::int64_t>(threads_, std::max<std::int64_t>(n / std::max<std::int64_t>(grain, 1), 1)));
    if (t <= 1 || running_.exchange(true)) {  // nested calls run inline
      fn(0, n, 0);
      return;
    }
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &fn;
      n_ = n;
      active_ = t;
      pending_ = t - 1;
      ++generation_;
    }
    cv_.notify_all();
    chunk(fn, n, t, 0);
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    running_ = false;
  }
  ~Pool() { stop_workers(); }

 private:
  Pool() {
    hwloc_topology_init(&topo_);
    hwloc_topology_load(topo_);
    start(0);
  }
  static void chunk(const Job& job, std::int64_t n, int active, int w) {
    const std::int64_t b = n * w / active, e = n * (w + 1) / active;
    if (b < e) job(b, e, w);
  }
  void pin(int w) {
    const int cores = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_CORE);
    if (cores <= 0) return;
    hwloc_obj_t core = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_CORE, unsigned(w % cores));
    if (core && core->cpuset) hwloc_set_cpubind(topo_, core->cpuset, HWLOC_CPUBIND_THREAD);
  }
  void start(int n) {
    const int cores = std::max(1, hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_CORE));
    threads_ = n > 0 ? n : cores;
    stop_ = false;
    for (int w = 1; w < threads_; ++w)
      workers_.emplace_back([this, w, seen = generation_]() mutable {
        pin(w);
        for (;;) {
          // The job is read under the lock, once: a worker with no share in one job may wake only
          // after the next one was published; reading active_/job_ later (outside the lock) made it
          // run that next job's share twice and drive pending_ below zero (a hang, seen with 16
          // threads and jobs of different widths).
          const Job* job;
          std::int64_t n;
          int active;
          {
            std::unique_lock<std::mutex> lk(m_);
            cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
            n = n_;
            active = active_;
          }
          if (w >= active) continue;
          chunk(*job, n, active, w);
          std::lock_guard<std::mutex> lk(m_);
          if (--pending_ == 0) done_cv_.notify_one();
        }
      });
  }
  void stop_workers() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  hwloc_topology_t topo_{};
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  const Job* job_ = nullptr;
  std::int64_t n_ = 0;
  int threads_ = 1, active_ = 1, pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::atomic<bool> running_{false};
};

}  // namespace

int threads() { return Pool::get().threads(); }
int cores() { return Pool::get().cores(); }
void set_threads(int n) {
  if ((n > 0 ? n : Pool::get().cores()) == Pool::get().threads()) return;
  Pool::get().resize(n);
}
void parallel_for(std::int64_t n, const Job& fn, std::int64_t grain) { Pool::get().run(n, fn, grain); }


}  // namespace rafter::cpu_pool
