// The collectives on host buffers over MPI, each started non-blocking and polled to its deadline
// (Ranks::wait), so that a rank that stops mid-collective ends the run in bounded time. Without
// MPI there is one rank and nothing to run them with.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "rafter/collector/ranks.hpp"

#if RAFTER_HAVE_MPI
#include <mpi.h>
#endif

namespace rafter {

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
  u += 0x7fff + ((u >> 16) & 1);
  return std::uint16_t(u >> 16);
}

float from_bf16(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllToAll: return "all_to_all";
    case Collective::Broadcast: return "broadcast";
    case Collective::SendRecv: return "send_recv";
  }
  return "?";
}

std::optional<Collective> collective_from_name(std::string_view name) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                       Collective::AllToAll, Collective::Broadcast, Collective::SendRecv})
    if (collective_name(c) == name) return c;
  return std::nullopt;
}

double bus_factor(Collective c, int n) {
  switch (c) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::Broadcast:
    case Collective::SendRecv: return 1;
    default: return double(n - 1) / n;
  }
}

RanksTiming time_across_ranks(Ranks& ranks, const RepeatPolicy& policy, const std::function<void()>& call,
                              std::string_view what) {
  for (int i = 0; i < policy.warmup; ++i) call();
  ranks.barrier(what);
  double t0 = now_seconds();
  call();
  double repeats = std::clamp(policy.min_total_seconds / std::max(now_seconds() - t0, 1e-9),
                              double(policy.min_repeats), double(policy.max_repeats));
  ranks.broadcast(&repeats, sizeof repeats, 0, what);
  std::vector<double> mine;
  for (int i = 0; i < int(repeats); ++i) {
    ranks.barrier(what);
    t0 = now_seconds();
    call();
    mine.push_back(now_seconds() - t0);
  }
  const std::vector<double> all = ranks.all_gather(mine, what);
  RanksTiming out;
  for (int r = 0; r * mine.size() < all.size(); ++r) {
    const Summary s = summarize(std::span(all).subspan(std::size_t(r) * mine.size(), mine.size()));
    if (r == 0 || s.median > out.summary.median) out = {s, r};
  }
  return out;
}

#if RAFTER_HAVE_MPI
namespace {
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_bf16(from_bf16(a[i]) + from_bf16(b[i]));
}

MPI_Op bf16_sum_op() {
  static MPI_Op op = [] {
    MPI_Op o;
    MPI_Op_create(&bf16_sum, 1, &o);
    return o;
  }();
  return op;
}

std::vector<MPI_Request> start(Ranks& ranks, const RankGroup& group, Collective c, WireType t,
                               const void* in_ptr, void* out, std::size_t count) {
  const int n = group.size, r = group.rank, S = int(count), shard = int(count / std::size_t(n));
  const MPI_Comm comm = *static_cast<const MPI_Comm*>(ranks.communicator(group));
  const MPI_Datatype type = t == WireType::BF16 ? MPI_UINT16_T : MPI_FLOAT;
  const MPI_Op sum = t == WireType::BF16 ? bf16_sum_op() : MPI_SUM;
  const std::size_t elem = t == WireType::BF16 ? 2 : 4;
  auto* in = const_cast<char*>(static_cast<const char*>(in_ptr));  // MPI-3 takes const; Open MPI 4 does too
  std::vector<MPI_Request> req(1, MPI_REQUEST_NULL);
  switch (c) {
    case Collective::AllReduce:
      MPI_Iallreduce(in, out, S, type, sum, comm, &req[0]);
      break;
    case Collective::ReduceScatter:
      MPI_Ireduce_scatter_block(in, out, shard, type, sum, comm, &req[0]);
      break;
    case Collective::AllGather:
      MPI_Iallgather(in + std::size_t(r) * std::size_t(shard) * elem, shard, type, out, shard, type, comm,
                     &req[0]);
      break;
    case Collective::AllToAll:
      MPI_Ialltoall(in, shard, type, out, shard, type, comm, &req[0]);
      break;
    case Collective::Broadcast:
      if (r == 0) std::memcpy(out, in, count * elem);
      MPI_Ibcast(out, S, type, 0, comm, &req[0]);
      break;
    case Collective::SendRecv:
      req.resize(2, MPI_REQUEST_NULL);
      MPI_Irecv(out, S, type, (r + 1) % n, 1, comm, &req[0]);
      MPI_Isend(in, S, type, (r + n - 1) % n, 1, comm, &req[1]);
      break;
  }
  return req;
}
}  // namespace

void run_collective(Ranks& ranks, Collective c, WireType t, const void* in, void* out, std::size_t count,
                    std::string_view what, const RankGroup* group) {
  if (!ranks.mpi()) throw InputError(fmt::format("{}: not launched under mpirun", what));
  if (count > std::size_t(INT32_MAX)) throw InputError(fmt::format("{}: more than 2^31 elements per call", what));
  const RankGroup g = group ? *group : rank_group(ranks.rank(), ranks.size(), ranks.size());
  std::vector<MPI_Request> req = start(ranks, g, c, t, in, out, count);
  ranks.wait(what, [&] {
    int flag = 0;
    MPI_Testall(int(req.size()), req.data(), &flag, MPI_STATUSES_IGNORE);
    return flag != 0;
  });
}
#else
void run_collective(Ranks&, Collective, WireType, const void*, void*, std::size_t, std::string_view what,
                    const RankGroup*) {
  throw InputError(fmt::format("{}: rafter was built without MPI", what));
}
#endif

}  // namespace rafter
