// RAFTER_CPU_ISA: the four names, their order, and one line naming an unknown value.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "rafter/collector/cpu_isa.hpp"
#include "rafter/collector/error.hpp"

using namespace rafter;

namespace {

// Sets RAFTER_CPU_ISA for one scope and puts back what was there (ctest may run this test under
// a held ISA).
class ScopedIsa {
 public:
  explicit ScopedIsa(const char* value) {
    if (const char* old = std::getenv("RAFTER_CPU_ISA")) old_ = old;
    value ? setenv("RAFTER_CPU_ISA", value, 1) : unsetenv("RAFTER_CPU_ISA");
  }
  ~ScopedIsa() { old_ ? setenv("RAFTER_CPU_ISA", old_->c_str(), 1) : unsetenv("RAFTER_CPU_ISA"); }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST(CpuIsa, NamesRoundTripAndOrderNarrowToWide) {
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Sse41, CpuIsa::Avx2, CpuIsa::Avx512})
    EXPECT_EQ(parse_cpu_isa(to_string(isa)), isa);
  EXPECT_LT(CpuIsa::Scalar, CpuIsa::Sse41);
  EXPECT_LT(CpuIsa::Sse41, CpuIsa::Avx2);
  EXPECT_LT(CpuIsa::Avx2, CpuIsa::Avx512);
}

TEST(CpuIsa, UnknownValueIsAOneLineInputErrorNamingIt) {
  for (const char* bad : {"avx3", "AVX2", "sse", "avx512 "}) {
    try {
      parse_cpu_isa(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("RAFTER_CPU_ISA=") + bad), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  ScopedIsa held("avx1024");
  EXPECT_THROW(held_cpu_isa(), InputError);
}

TEST(CpuIsa, HoldIsACeiling) {
  {
    ScopedIsa none(nullptr);
    EXPECT_FALSE(held_cpu_isa().has_value());
    EXPECT_TRUE(cpu_isa_allowed(CpuIsa::Avx512));
  }
  {
    ScopedIsa empty("");
    EXPECT_FALSE(held_cpu_isa().has_value());
  }
  ScopedIsa avx2("avx2");
  EXPECT_EQ(held_cpu_isa(), CpuIsa::Avx2);
  EXPECT_TRUE(cpu_isa_allowed(CpuIsa::Scalar));
  EXPECT_TRUE(cpu_isa_allowed(CpuIsa::Sse41));
  EXPECT_TRUE(cpu_isa_allowed(CpuIsa::Avx2));
  EXPECT_FALSE(cpu_isa_allowed(CpuIsa::Avx512));
}
