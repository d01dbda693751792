// Thread team and aligned buffers.
#include "thread_team.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <utility>

#include "rafter/collector/interrupt.hpp"

namespace rafter::probes::cpu {

ThreadTeam::ThreadTeam(int threads) : size_(threads < 1 ? 1 : threads), start_(size_), done_(size_) {
  pinned_ = pin_current_thread_to_core(0);
  for (int i = 1; i < size_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadTeam::~ThreadTeam() {
  stop_ = true;
  start_.arrive_and_wait();
  for (auto& t : threads_) t.join();
}

void ThreadTeam::worker(int index) {
  if (!pin_current_thread_to_core(index)) pinned_ = false;
  for (;;) {
    start_.arrive_and_wait();
    if (stop_) return;
    (*job_)(index);
    done_.arrive_and_wait();
  }
}

void ThreadTeam::run(const std::function<void(int)>& fn) {
  job_ = &fn;
  start_.arrive_and_wait();
  fn(0);
  done_.arrive_and_wait();
}

TeamSample team_sample(ThreadTeam& team, const std::function<void(int)>& fn) {
  std::vector<double> start(static_cast<std::size_t>(team.size())), end(start.size());
  team.run([&](int t) {
    const auto i = static_cast<std::size_t>(t);
    start[i] = now_seconds();
    fn(t);
    end[i] = now_seconds();
  });
  TeamSample s;
  for (std::size_t i = 0; i < start.size(); ++i) s.seconds = std::max(s.seconds, end[i] - start[i]);
  const double together =
      *std::min_element(end.begin(), end.end()) - *std::max_element(start.begin(), start.end());
  s.overlap = s.seconds > 0 ? std::max(0.0, together / s.seconds) : 1;
  return s;
}

Summary measure_team_seconds(const RepeatPolicy& policy, ThreadTeam& team, const std::function<void(int)>& fn,
                             double* min_overlap) {
  for (int i = 0; i < policy.warmup; ++i) {
    throw_if_interrupted();
    team_sample(team, fn);
  }
  std::vector<double> samples;
  double measured = 0, worst = 1;
  const double begin = now_seconds();
  while (static_cast<int>(samples.size()) < policy.max_repeats) {
    const int n = static_cast<int>(samples.size());
    if (n >= policy.min_repeats &&
        (measured >= policy.min_total_seconds || now_seconds() - begin >= policy.max_total_seconds))
      break;
    throw_if_interrupted();  // between samples, on the driving thread: the team is idle
    const TeamSample s = team_sample(team, fn);
    samples.push_back(s.seconds);
    worst = std::min(worst, s.overlap);
    measured += s.seconds;
  }
  if (min_overlap != nullptr) *min_overlap = worst;
  return summarize(samples);
}

double anon_huge_pages_bytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == "AnonHugePages:") {
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  return -1;
}

AlignedBuffer::AlignedBuffer(std::size_t bytes, bool huge_pages) {
  // 2 MiB alignment lets the kernel back the buffer with transparent huge pages.
  const std::size_t align = huge_pages ? (std::size_t{2} << 20) : 64;
  bytes_ = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, bytes_);
  if (p == nullptr) throw std::bad_alloc();
  data_ = static_cast<double*>(p);
  if (huge_pages) huge_ = madvise(p, bytes_, MADV_HUGEPAGE) == 0;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_), huge_(o.huge_) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  std::swap(data_, o.data_);
  bytes_ = o.bytes_;
  huge_ = o.huge_;
  return *this;
}

}  // namespace rafter::probes::cpu
