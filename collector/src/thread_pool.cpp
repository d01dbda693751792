// The CPU thread pool (see thread_pool.hpp): workers pinned one per core through hwloc, woken per
// job under a mutex; the caller is worker 0 and runs its own share. Each side spins a while before
// it sleeps, as OpenMP runtimes do: a worker for the next job, the caller for the workers' shares.
// Back-to-back jobs (an operator's repeats, a flush then the operator) then never wait on a
// futex wake-up, which on some VMs takes 30-150 µs where a spin hand-over takes under 1 µs
// (2-vCPU Ice Lake VM: cpu.launch medians 2.2-63 µs run to run when every job slept).
#include "rafter/collector/thread_pool.hpp"

#include <hwloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace rafter::cpu_pool {

namespace {

// How long a worker waits for the next job, and the caller for the workers' shares, by spinning
// before it blocks. Bounded so that an idle pool (or one sharing its cores with other processes)
// gives its cores back within a tenth of a millisecond.
constexpr auto kWorkerSpin = std::chrono::microseconds(100);
constexpr auto kCallerSpin = std::chrono::microseconds(200);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or the budget is spent; true when done() held. The clock is read every 64
// turns; past the first few microseconds each turn also yields, for a core shared with others.
template <class Done>
bool spin_until(const Done& done, std::chrono::nanoseconds budget) {
  const auto start = std::chrono::steady_clock::now();
  bool yielding = false;
  for (unsigned turn = 1;; ++turn) {
    if (done()) return true;
    if (yielding)
      std::this_thread::yield();
    else
      cpu_relax();
    if (turn % 64 == 0) {
      const auto spent = std::chrono::steady_clock::now() - start;
      if (spent > budget) return false;
      yielding = spent > std::chrono::microseconds(5);
    }
  }
}

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
      pending_.store(t - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);  // spinning workers see it without the lock
    }
    cv_.notify_all();
    chunk(fn, n, t, 0);
    const auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(finished, kCallerSpin)) {
      std::unique_lock<std::mutex> lk(m_);
      done_cv_.wait(lk, finished);
    }
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
      workers_.emplace_back([this, w, seen = generation_.load()]() mutable {
        pin(w);
        for (;;) {
          // The job is read under the lock, once: a worker with no share in one job may wake only
          // after the next one was published; reading active_/job_ later (outside the lock) made it
          // run that next job's share twice and drive pending_ below zero (a hang, seen with 16
          // threads and jobs of different widths).
          const Job* job;
          std::int64_t n;
          int active;
          const auto published = [&] {
            return stop_.load(std::memory_order_relaxed) ||
                   generation_.load(std::memory_order_acquire) != seen;
          };
          spin_until(published, kWorkerSpin);
          {
            std::unique_lock<std::mutex> lk(m_);
            cv_.wait(lk, published);
            if (stop_) return;
            seen = generation_.load(std::memory_order_relaxed);
            job = job_;
            n = n_;
            active = active_;
          }
          if (w >= active) continue;
          chunk(*job, n, active, w);
          // The last share to finish wakes a caller that stopped spinning; under the lock, so that
          // the caller cannot check pending_ and then miss the notification.
          if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lk(m_);
            done_cv_.notify_one();
          }
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
  int threads_ = 1, active_ = 1;
  std::atomic<int> pending_{0};               // shares not finished yet (written by the workers)
  std::atomic<std::uint64_t> generation_{0};  // jobs published (written under m_)
  std::atomic<bool> stop_{false};             // written under m_
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
