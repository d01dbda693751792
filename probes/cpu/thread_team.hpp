// A team of threads, one per core, each pinned through hwloc, that run the same function at once.
// Thread 0 is the caller, pinned to core 0 while the team lives (its binding restored after). Data is
// first-touched by the thread that uses it (each thread allocates its own buffers inside run()), so that on
// NUMA machines it lands on that thread's node.
#pragma once
#include <atomic>
#include <barrier>
#include <functional>
#include <thread>
#include <vector>

#include "../src/hwloc_topology.hpp"
#include "rafter/collector/timing.hpp"

namespace rafter::probes::cpu {

class ThreadTeam {
 public:
  explicit ThreadTeam(int threads);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }
  bool pinned() const { return pinned_; }  // every thread bound to its own core
  // Runs fn(thread_index) on every thread, all released together; returns when all are done.
  void run(const std::function<void(int)>& fn);

 private:
  void worker(int index);
  CallerBinding caller_binding_;  // first member: saved before the caller is pinned, restored last
  int size_;
  std::atomic<bool> pinned_{true};
  bool stop_ = false;
  const std::function<void(int)>* job_ = nullptr;
  std::barrier<> start_;
  std::barrier<> done_;
  std::vector<std::thread> threads_;
};

// One sample of fn on every thread: each thread stamps its own start and end, and the sample is
// the slowest thread's run time (likwid-bench's convention), so the time to wake the team is not
// counted. overlap = (earliest end - latest start) / slowest run: 1 when the threads really ran
// together, lower when one was scheduled late (then a shared level's aggregate is overstated).
struct TeamSample {
  double seconds = 0;
  double overlap = 1;
};
TeamSample team_sample(ThreadTeam& team, const std::function<void(int)>& fn);

// Samples per the repeat policy (warm-up, min/max repeats, time budget, as collector's
// measure_seconds); min_overlap receives the worst overlap seen.
Summary measure_team_seconds(const RepeatPolicy& policy, ThreadTeam& team, const std::function<void(int)>& fn,
                             double* min_overlap = nullptr);

// Bytes of this process's anonymous memory backed by transparent huge pages (AnonHugePages of
// /proc/self/smaps_rollup), -1 when unreadable: shows whether madvise(MADV_HUGEPAGE) took effect.
double anon_huge_pages_bytes();

// A 64-byte aligned buffer of doubles, freed on destruction; huge pages requested when asked.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(std::size_t bytes, bool huge_pages);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  double* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  bool huge_pages() const { return huge_; }  // madvise(MADV_HUGEPAGE) accepted

 private:
  double* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool huge_ = false;
};

}  // namespace rafter::probes::cpu
