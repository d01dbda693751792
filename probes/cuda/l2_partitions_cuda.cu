// cuda.l2_partitions: L2 read bandwidth with every SM reading only lines homed in its near L2
// partition, and only lines of its far one. Every SM first times 16 dependent re-loads of each line
// of a span (ld.global.cg, L2 hits; all SMs at once, 8 chains an SM): each SM's per-line latencies
// split in a fast and a slow group (split_latencies), which name that SM's near and far lines. Each
// SM then gets its own near and far list, drawn at random from its groups, and every block reads
// the lists of the SM it runs on (%smid), four 128-byte lines a warp-wide 16-byte load. Two more
// modes are the same kernel's controls: half the warps on each list, and runs of consecutive lines.
// Each block's sum is checked against the host's sum of the lines it read.
#include <algorithm>
#include <iomanip>
#include <random>
#include <sstream>
#include <vector>

#include "cuda_util.hpp"
#include "gpu_model.hpp"

namespace rafter::probes::cuda {
namespace {

using u64 = unsigned long long;
constexpr int kReloads = 16;
constexpr int kChains = 8;  // warps of an SM timing lines at once (lane 0 each)
constexpr int kLineWords = 32;

__device__ __forceinline__ unsigned sm_id() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

__device__ __forceinline__ u64 load_cg(const u64* p) {
  u64 v;
  asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint4 load_cg(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

constexpr int kMaxSmIds = 1024;

// The first block to land on an SM owns it and times every line of `buf` (zeros: each re-load's
// address is the line itself); the other blocks on that SM leave. cycles: [SM id][line], the
// fastest of this launch and what the slot held.
__global__ void time_lines(const u64* buf, int lines, int* owner, unsigned short* cycles) {
  __shared__ int mine;
  const unsigned sm = sm_id();
  if (threadIdx.x == 0) mine = sm < kMaxSmIds && atomicCAS(owner + sm, -1, int(blockIdx.x)) == -1;
  __syncthreads();
  if (!mine || threadIdx.x % 32) return;
  unsigned short* out = cycles + std::size_t(sm) * lines;
  for (int l = threadIdx.x / 32; l < lines; l += kChains) {
    const u64* p = buf + std::size_t(l) * 16;
    u64 j = load_cg(p);
    const long long t0 = clock64();
    for (int r = 0; r < kReloads; ++r) j = load_cg(p + j);
    const long long t1 = clock64();
    const unsigned c = unsigned((t1 - t0) / kReloads) + unsigned(j);  // j is 0: keeps the chain live
    out[l] = (unsigned short)(c < out[l] ? c : out[l]);
  }
}

// mode 0: each warp reads its SM's near list, 1: the far list, 2: even warps near, odd warps far,
// 3: a run of consecutive lines (the kernel's own ceiling on lines of both partitions in address
// order). lists: [SM][near, far, run][k] line indices, k a multiple of 32; every warp reads its list
// `rounds` times from its own starting point. sums[block] = the block's 32-bit sum of the words it
// read.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) read_lists(const uint4* buf, const unsigned* lists, int k,
                                                       int mode, int rounds, unsigned* sums, int* block_sm) {
  const unsigned sm = sm_id();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int which = mode == 2 ? warp % 2 : mode == 3 ? 2 : mode;
  const unsigned* list = lists + (std::size_t(sm) * 3 + which) * k;
  int at = (int(blockIdx.x) * (kThreads / 32) + warp) * 32 * 37 % k;  // a multiple of 32
  unsigned acc = 0;
  unsigned idx = list[at + lane];
  for (int step = 0, steps = rounds * (k / 32); step < steps; ++step) {
    at = at + 32 == k ? 0 : at + 32;
    const unsigned next = list[at + lane];  // the next 32 lines' indices, in flight with these loads
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const unsigned line = __shfl_sync(~0u, idx, q * 4 + lane / 8);
      const uint4 v = load_cg(buf + std::size_t(line) * (kLineWords / 4) + lane % 8);
      acc += v.x + v.y + v.z + v.w;
    }
    idx = next;
  }
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(~0u, acc, o);
  if (lane == 0) atomicAdd(sums + blockIdx.x, acc);
  if (threadIdx.x == 0) block_sm[blockIdx.x] = int(sm);
}

struct Shape {
  int threads, blocks_per_sm;
};
constexpr Shape kShapes[] = {{256, 8}, {512, 4}, {1024, 2}};

void launch_read(const Shape& s, int blocks, const uint4* buf, const unsigned* lists, int k, int mode,
                 int rounds, unsigned* sums, int* block_sm, cudaStream_t st) {
  if (s.threads == 256) read_lists<256><<<blocks, 256, 0, st>>>(buf, lists, k, mode, rounds, sums, block_sm);
  if (s.threads == 512) read_lists<512><<<blocks, 512, 0, st>>>(buf, lists, k, mode, rounds, sums, block_sm);
  if (s.threads == 1024)
    read_lists<1024><<<blocks, 1024, 0, st>>>(buf, lists, k, mode, rounds, sums, block_sm);
  check_launch("read_lists");
}

// Per SM: the near (fast) and far (slow) lines of the span, empty when its latencies do not split.
struct SmLines {
  std::vector<unsigned> near, far;
  double near_cycles = 0, far_cycles = 0;
};

SmLines split_sm(const unsigned short* cycles, int lines) {
  std::vector<double> c(cycles, cycles + lines);
  SmLines s;
  auto split = split_latencies(c);
  if (!split) return s;
  std::vector<double> sorted = c;
  std::sort(sorted.begin(), sorted.end());
  const double cut = sorted[split->fast_lines - 1];  // the slowest near line
  for (int l = 0; l < lines; ++l) (c[l] <= cut ? s.near : s.far).push_back(unsigned(l));
  s.near_cycles = split->fast_median;
  s.far_cycles = split->slow_median;
  return s;
}

// Every SM's per-line latencies (all SMs at once, `passes` launches, the fastest kept), split.
struct Classified {
  std::vector<SmLines> per_sm = std::vector<SmLines>(kMaxSmIds);
  std::vector<bool> reached = std::vector<bool>(kMaxSmIds, false);
  int ids = 0;                                              // highest %smid reached + 1
  int unsplit = 0;                                          // SMs reached whose latencies did not split
  std::vector<double> near_share, near_cycles, far_cycles;  // over the split SMs
};

Classified classify_lines(const DeviceBuffer& buf, int lines, int sms, int passes) {
  DeviceBuffer owner(kMaxSmIds * 4), cycles(std::size_t(kMaxSmIds) * lines * 2);
  check(cudaMemset(cycles.get(), 0xFF, cycles.bytes()), "clear line cycles");
  Classified c;
  std::vector<int> h_owner(kMaxSmIds);
  for (int pass = 0; pass < passes; ++pass) {
    check(cudaMemset(owner.get(), 0xFF, owner.bytes()), "clear SM owners");
    time_lines<<<4 * sms, kChains * 32>>>(buf.get<u64>(), lines, owner.get<int>(),
                                          cycles.get<unsigned short>());
    check_launch("time_lines");
    check(cudaMemcpy(h_owner.data(), owner.get(), owner.bytes(), cudaMemcpyDeviceToHost), "copy SM owners");
    for (int s = 0; s < kMaxSmIds; ++s) c.reached[s] = c.reached[s] || h_owner[s] >= 0;
  }
  std::vector<unsigned short> h_cycles(std::size_t(kMaxSmIds) * lines);
  check(cudaMemcpy(h_cycles.data(), cycles.get(), cycles.bytes(), cudaMemcpyDeviceToHost),
        "copy line cycles");
  for (int s = 0; s < kMaxSmIds; ++s) {
    if (!c.reached[s]) continue;
    c.ids = s + 1;
    c.per_sm[s] = split_sm(h_cycles.data() + std::size_t(s) * lines, lines);
    if (c.per_sm[s].near.empty()) {
      ++c.unsplit;
      continue;
    }
    c.near_share.push_back(double(c.per_sm[s].near.size()) / lines);
    c.near_cycles.push_back(c.per_sm[s].near_cycles);
    c.far_cycles.push_back(c.per_sm[s].far_cycles);
  }
  return c;
}

// How alike the SMs class the lines: the share of lines each SM classes as the first SM does. Two
// partitions, each near half the SMs, give two groups at ~100 % and ~0 %.
nlohmann::json agreement_with_first(const Classified& c, int lines) {
  std::vector<char> first_near(lines, 0);
  int first = 0;
  while (!c.reached[first]) ++first;
  for (unsigned l : c.per_sm[first].near) first_near[l] = 1;
  int same = 0, opposite = 0, neither = 0;
  std::vector<double> agree_share;
  for (int s = 0; s < c.ids; ++s) {
    if (!c.reached[s]) continue;
    std::vector<char> near(lines, 0);
    for (unsigned l : c.per_sm[s].near) near[l] = 1;
    int alike = 0;
    for (int l = 0; l < lines; ++l) alike += near[l] == first_near[l];
    const double share = double(alike) / lines;
    agree_share.push_back(share);
    (share >= 0.8 ? same : share <= 0.2 ? opposite : neither) += 1;
  }
  return {{"same", same},
          {"opposite", opposite},
          {"neither", neither},
          {"share_alike", to_json(summarize(agree_share))}};
}

// Each SM's lists ([SM][near, far, run][k]): k lines drawn at random from its near group and from
// its far group, and a run of k consecutive lines from a random start.
std::vector<unsigned> make_lists(const Classified& c, int k, int lines) {
  std::mt19937_64 rng(21);
  std::vector<unsigned> lists(std::size_t(c.ids) * 3 * k, 0);
  for (int s = 0; s < c.ids; ++s) {
    if (!c.reached[s]) continue;
    for (int far = 0; far < 2; ++far) {
      auto group = far ? c.per_sm[s].far : c.per_sm[s].near;
      std::shuffle(group.begin(), group.end(), rng);
      std::copy_n(group.begin(), k, lists.begin() + (std::size_t(s) * 3 + far) * k);
    }
    const unsigned start = unsigned(rng() % unsigned(lines));
    for (int j = 0; j < k; ++j)
      lists[(std::size_t(s) * 3 + 2) * k + j] = (start + unsigned(j)) % unsigned(lines);
  }
  return lists;
}

// The 32-bit sum of the words of each list's lines, as read back from `buf`.
std::vector<unsigned> list_sums(const DeviceBuffer& buf, int lines, const std::vector<unsigned>& lists,
                                int k) {
  std::vector<unsigned> words(std::size_t(lines) * kLineWords), line_sum(lines, 0);
  check(cudaMemcpy(words.data(), buf.get(), buf.bytes(), cudaMemcpyDeviceToHost), "copy the line buffer");
  for (int l = 0; l < lines; ++l)
    for (int w = 0; w < kLineWords; ++w) line_sum[l] += words[std::size_t(l) * kLineWords + w];
  std::vector<unsigned> sums(lists.size() / k, 0);
  for (std::size_t i = 0; i < sums.size(); ++i)
    for (int j = 0; j < k; ++j) sums[i] += line_sum[lists[i * k + j]];
  return sums;
}

struct ModeResult {
  Measurement m;
  Shape shape{};
  bool checked = false;
};

// What every mode reads: the line buffer, the lists on the device and their host-side sums.
struct Lists {
  const DeviceBuffer& buf;
  const DeviceBuffer& device_lists;
  const std::vector<unsigned>& sums;  // list_sums
  const Classified& c;
  int k;
};

// One mode's fastest launch shape, each shape checked once: every block's sum is that of the lists
// of the SM it ran on.
ModeResult time_mode(const ProbeOptions& options, const Device& device, const Lists& x, int sms, int mode,
                     int rounds) {
  static const char* names[] = {"read_near_partition", "read_far_partition", "read_both_partitions",
                                "read_run"};
  DeviceBuffer sums(std::size_t(sms) * 8 * 4), block_sm(std::size_t(sms) * 8 * 4);
  ModeResult best;
  for (const Shape& shape : kShapes) {
    const int blocks = shape.blocks_per_sm * sms, warps = shape.threads / 32;
    check(cudaMemset(sums.get(), 0, sums.bytes()), "clear block sums");
    launch_read(shape, blocks, x.buf.get<uint4>(), x.device_lists.get<unsigned>(), x.k, mode, 1,
                sums.get<unsigned>(), block_sm.get<int>(), nullptr);
    std::vector<unsigned> got(blocks);
    std::vector<int> where(blocks);
    check(cudaMemcpy(got.data(), sums.get(), blocks * 4, cudaMemcpyDeviceToHost), "copy block sums");
    check(cudaMemcpy(where.data(), block_sm.get(), blocks * 4, cudaMemcpyDeviceToHost), "copy block SMs");
    bool ok = true;
    for (int b = 0; b < blocks && ok; ++b) {
      const int s = where[b];
      ok = s >= 0 && s < x.c.ids && x.c.reached[s];
      if (!ok) break;
      const unsigned near = x.sums[std::size_t(s) * 3], far = x.sums[std::size_t(s) * 3 + 1],
                     run = x.sums[std::size_t(s) * 3 + 2];
      const unsigned want = mode == 0   ? unsigned(warps) * near
                            : mode == 1 ? unsigned(warps) * far
                            : mode == 2 ? unsigned(warps / 2) * (near + far)
                                        : unsigned(warps) * run;
      ok = got[b] == want;
    }
    Measurement m;
    m.kind = CeilingKind::Bandwidth;
    m.resource = "L2";
    m.operation = names[mode];
    m.isa = "ld.global.cg";
    m.unit = "B/s";
    m.work_per_launch = double(blocks) * warps * rounds * double(x.k) * 128;
    m.timing = gpu::time_launches(
        [&](void* st) {
          launch_read(shape, blocks, x.buf.get<uint4>(), x.device_lists.get<unsigned>(), x.k, mode, rounds,
                      sums.get<unsigned>(), block_sm.get<int>(), cudaStream_t(st));
        },
        timing_options(options, device, false));
    const double rate = m.work_per_launch / m.timing.seconds.median;
    if (best.m.work_per_launch == 0 || rate > best.m.work_per_launch / best.m.timing.seconds.median)
      best = {m, shape, ok};
  }
  return best;
}

void run_partitions_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  check(cudaSetDevice(dev), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  const std::string key = "cuda.l2_partitions." + device.id;
  const int sms = p.multiProcessorCount;
  // A span of an eighth of the L2 (6.25 MiB on the H100's 50 MiB): every line stays resident.
  const int lines = std::max(4096, int(double(p.l2CacheSize) / 8 / 128) / 32 * 32);
  DeviceBuffer buf(std::size_t(lines) * 128);
  check(cudaMemset(buf.get(), 0, buf.bytes()), "clear the line buffer");
  const Classified c = classify_lines(buf, lines, sms, options.quick ? 1 : 2);
  // Every SM must have been reached and its latencies split: a block of the bandwidth launch may
  // land on any of them.
  if (c.unsplit > 0 || int(c.near_share.size()) < sms) {
    profile.conditions[key] = std::to_string(c.near_share.size()) + " of " + std::to_string(sms) +
                              " SMs reached with a near/far split of their per-line L2 latencies: no "
                              "partition bandwidth";
    return;
  }
  std::size_t smallest = lines;
  for (int s = 0; s < c.ids; ++s)
    if (c.reached[s]) smallest = std::min({smallest, c.per_sm[s].near.size(), c.per_sm[s].far.size()});
  const int k = std::min(4096, int(smallest) / 32 * 32);
  if (k < 1024) {
    profile.conditions[key] = "an SM's near or far group holds " + std::to_string(smallest) +
                              " lines, fewer than 1024: no partition bandwidth";
    return;
  }
  const nlohmann::json agreement = agreement_with_first(c, lines);
  const std::vector<unsigned> h_lists = make_lists(c, k, lines);
  fill_random(buf.get(), buf.bytes(), 22);
  const std::vector<unsigned> sums = list_sums(buf, lines, h_lists, k);
  DeviceBuffer lists(h_lists.size() * 4);
  check(cudaMemcpy(lists.get(), h_lists.data(), lists.bytes(), cudaMemcpyHostToDevice), "copy line lists");
  const int rounds = options.quick ? 1 : 2;
  const Lists x{buf, lists, sums, c, k};
  ModeResult best[4];
  for (int mode = 0; mode < 4; ++mode) best[mode] = time_mode(options, device, x, sms, mode, rounds);
  auto rate = [](const ModeResult& r) { return r.m.work_per_launch / r.m.timing.seconds.median; };
  const bool checked = best[0].checked && best[1].checked && best[2].checked && best[3].checked;
  for (int mode = 0; mode < 2; ++mode) {
    const std::vector<double>& cyc = mode == 0 ? c.near_cycles : c.far_cycles;
    nlohmann::json params = {
        {"l2_partition", mode == 0 ? "near" : "far"},
        {"lines_per_list", k},
        {"span_bytes", double(lines) * 128},
        {"sms", sms},
        {"threads_per_block", best[mode].shape.threads},
        {"blocks_per_sm", best[mode].shape.blocks_per_sm},
        {"rounds", rounds},
        {"mixed_control_bytes_per_second", rate(best[2])},
        {"consecutive_lines_bytes_per_second", rate(best[3])},
        {"sms_by_agreement_with_first", agreement},
        {"other_partition_bytes_per_second", rate(best[1 - mode])},
        {"hit_cycles_median_over_sms", summarize(cyc).median},
        {"near_share_of_lines_over_sms", to_json(summarize(c.near_share))},
        {"value_is",
         "bytes every SM read from its own list of lines homed in its near (far) L2 partition, as its "
         "per-line hit latencies named them, / median launch time; the fastest of 3 launch shapes"},
        {"check", {{"pass", checked}, {"what", "each block's sum of the words it read, all four modes"}}}};
    Ceiling ceiling = make_ceiling(device, "cuda.l2_partitions", best[mode].m, params);
    attach_datasheet(ceiling, std::nullopt);
    if (!checked) ceiling.flag = "check_failed";
    profile.ceilings.push_back(std::move(ceiling));
  }
  std::ostringstream line;
  line << std::fixed << std::setprecision(2) << "every SM on its near lines " << rate(best[0]) / 1e12
       << " TB/s, on its far lines " << rate(best[1]) / 1e12 << ", half and half " << rate(best[2]) / 1e12
       << ", consecutive lines " << rate(best[3]) / 1e12 << std::setprecision(0) << "; near lines "
       << 100 * summarize(c.near_share).min << "-" << 100 * summarize(c.near_share).max
       << "% of an SM's, hit " << summarize(c.near_cycles).median << " vs " << summarize(c.far_cycles).median
       << " cycles (medians over " << sms
       << " SMs, all timing at once); SMs whose near lines are the first SM's (>= 80% of lines classed "
       << "alike) " << agreement["same"].get<int>() << ", its far lines (<= 20%) "
       << agreement["opposite"].get<int>() << ", neither " << agreement["neither"].get<int>();
  profile.conditions[key] = line.str();
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.l2_partitions", "cuda",
                      "L2 read bandwidth with every SM on lines of its near, then of its far, L2 partition",
                      run_partitions_probe);

}  // namespace rafter::probes::cuda
