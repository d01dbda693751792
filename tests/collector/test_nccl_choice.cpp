// NCCL's choice per call (nccl_choice.hpp), without NCCL: the program exports the plugin where NCCL
// looks for it (dlsym of the program's own handle, as NCCL_PROFILER_PLUGIN=STATIC_PLUGIN does), and
// NCCL's calls are played through its function table with v5 descriptors: the activation mask asks
// for collective and point-to-point events only, other events are ignored, repeated calls are
// counted once per distinct choice, a take drains, and a record's details merge the ranks.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "rafter/collector/nccl_choice.hpp"
#include "rafter/collector/nccl_profiler_v5.hpp"

namespace {

using rafter::nccl_v5::EventDescr;
using rafter::nccl_v5::Profiler;

const Profiler* exported_plugin() {
  void* self = dlopen(nullptr, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(self, nullptr);
  const auto* p = static_cast<const Profiler*>(dlsym(self, "ncclProfiler_v5"));
  dlclose(self);
  return p;
}

EventDescr coll(int rank, const char* algo, const char* proto, int channels) {
  EventDescr d{};
  d.type = rafter::nccl_v5::kEventColl;
  d.rank = rank;
  d.coll.func = "AllReduce";
  d.coll.datatype = "ncclBfloat16";
  d.coll.count = 1 << 20;
  d.coll.algo = algo;
  d.coll.proto = proto;
  d.coll.channels = std::uint8_t(channels);
  d.coll.warps = 16;
  return d;
}

TEST(NcclChoice, PluginNotesWhatNcclChoseAndMergesRanks) {
  // Before NCCL called init, a record says why nothing was noted.
  unsetenv("NCCL_PROFILER_PLUGIN");
  EXPECT_NE(rafter::nccl_choices_json({}).get<std::string>().find("NCCL loaded no profiler plugin v5"),
            std::string::npos);

  const Profiler* p = exported_plugin();
  ASSERT_NE(p, nullptr) << "ncclProfiler_v5 is not in the program's dynamic symbols";
  void* context = nullptr;
  int mask = -1;
  ASSERT_EQ(p->init(&context, 42, &mask, "", 1, 2, 0, nullptr), 0);
  EXPECT_NE(context, nullptr);
  EXPECT_EQ(mask, rafter::nccl_v5::kEventColl | rafter::nccl_v5::kEventP2p);

  rafter::nccl_choices_take();
  for (int rank : {0, 1})
    for (int i = 0; i < 3; ++i) {
      EventDescr d = coll(rank, "RING", "LL128", 24);
      void* handle = &d;
      ASSERT_EQ(p->start_event(context, &handle, &d), 0);
      EXPECT_EQ(handle, nullptr);  // nothing for NCCL to stop
    }
  EventDescr tree = coll(0, "TREE", "SIMPLE", 8);
  void* handle = nullptr;
  p->start_event(context, &handle, &tree);
  EventDescr send{};
  send.type = rafter::nccl_v5::kEventP2p;
  send.p2p.func = "Send";
  send.p2p.datatype = "ncclFloat32";
  send.p2p.count = 4096;
  send.p2p.peer = 1;
  send.p2p.channels = 2;
  p->start_event(context, &handle, &send);
  EventDescr proxy{};
  proxy.type = 1 << 3;  // a proxy operation: not asked for, ignored
  p->start_event(context, &handle, &proxy);
  EXPECT_EQ(p->stop_event(nullptr), 0);
  EXPECT_EQ(p->finalize(context), 0);

  const std::vector<rafter::NcclChoice> got = rafter::nccl_choices_take();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].algo, "RING");
  EXPECT_EQ(got[0].proto, "LL128");
  EXPECT_EQ(got[0].channels, 24);
  EXPECT_EQ(got[0].calls, 3u);
  EXPECT_EQ(got[1].rank, 1);
  EXPECT_EQ(got[2].algo, "TREE");
  EXPECT_EQ(got[2].calls, 1u);
  EXPECT_EQ(got[3].func, "Send");
  EXPECT_EQ(got[3].peer, 1);
  EXPECT_TRUE(rafter::nccl_choices_take().empty());  // drained

  const nlohmann::json j = rafter::nccl_choices_json(got);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["algo"], "RING");
  EXPECT_EQ(j[0]["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j[0]["calls"], 6);
  EXPECT_EQ(j[0]["count"], 1 << 20);
  EXPECT_EQ(j[1]["proto"], "SIMPLE");
  EXPECT_EQ(j[2]["peer"], 1);
  EXPECT_FALSE(j[2].contains("algo"));
  // Loaded but no call noted: said so.
  EXPECT_NE(rafter::nccl_choices_json({}).get<std::string>().find("NCCL started no event"),
            std::string::npos);
}

TEST(NcclChoice, EnableKeepsAPluginTheUserNamed) {
  setenv("NCCL_PROFILER_PLUGIN", "/opt/their/libnccl-profiler.so", 1);
  rafter::nccl_choices_enable();
  EXPECT_STREQ(std::getenv("NCCL_PROFILER_PLUGIN"), "/opt/their/libnccl-profiler.so");
  unsetenv("NCCL_PROFILER_PLUGIN");
  rafter::nccl_choices_enable();
  EXPECT_STREQ(std::getenv("NCCL_PROFILER_PLUGIN"), "STATIC_PLUGIN");
  unsetenv("NCCL_PROFILER_PLUGIN");
}

}  // namespace
