// The part of NCCL's profiler plugin ABI v5 (ext-profiler/README.md, NCCL 2.28) that rafter's
// plugin reads (nccl_choice.hpp): the event descriptor's collective and point-to-point members and
// the function table. Declared here, not taken from NCCL (which installs no profiler header); the
// offsets are asserted against the documented layout (LP64).
#pragma once
#include <cstddef>
#include <cstdint>

namespace rafter::nccl_v5 {

// NCCL's event type bits (its ncclProfileColl, ncclProfileP2p).
constexpr int kEventColl = 1 << 1;
constexpr int kEventP2p = 1 << 2;

struct EventDescr {
  std::uint64_t type;
  void* parent;
  int rank;
  union {
    struct {
      std::uint64_t seq;
      const char* func;
      const void* send;
      void* recv;
      std::size_t count;
      int root;
      const char* datatype;
      std::uint8_t channels, warps;
      const char* algo;
      const char* proto;
      void* parent_group;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      std::size_t count;
      int peer;
      std::uint8_t channels;
      void* parent_group;
    } p2p;
  };
};
static_assert(offsetof(EventDescr, coll) == 24 && offsetof(EventDescr, coll.channels) == 80 &&
              offsetof(EventDescr, coll.algo) == 88 && offsetof(EventDescr, coll.proto) == 96);
static_assert(offsetof(EventDescr, p2p.count) == 48 && offsetof(EventDescr, p2p.peer) == 56 &&
              offsetof(EventDescr, p2p.channels) == 60);

using Result = int;  // ncclResult_t; 0 is ncclSuccess
using LogFn = void (*)(int, unsigned long, const char*, int, const char*, ...);

struct Profiler {
  const char* name;
  Result (*init)(void** context, std::uint64_t comm_id, int* mask, const char* comm_name, int nodes,
                 int ranks, int rank, LogFn log);
  Result (*start_event)(void* context, void** handle, EventDescr* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, void* args);
  Result (*finalize)(void* context);
};

}  // namespace rafter::nccl_v5
