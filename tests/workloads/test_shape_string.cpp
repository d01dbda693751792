// The `--shape key=value,...` parser: strict about everything a typo could produce.
#include <gtest/gtest.h>

#include "rafter/collector/error.hpp"
#include "rafter/workloads/operator.hpp"

using namespace rafter;
using namespace rafter::workloads;

TEST(ShapeString, ParsesKeysAndValues) {
  EXPECT_EQ(parse_shape_string(""), Shape{});
  EXPECT_EQ(parse_shape_string("m=4096,n=1,causal=0"), (Shape{{"m", 4096}, {"n", 1}, {"causal", 0}}));
  EXPECT_EQ(parse_shape_string("x_1=281474976710656"), (Shape{{"x_1", kMaxShapeValue}}));
}

TEST(ShapeString, RejectsWhatATypoProduces) {
  for (const char* bad : {"m", "=4", "m=", "m=4,", ",m=4", "m=4,,n=2", "m=4x", "m=-4", "m=+4", "m= 4", " m=4", "m=4,m=5",
                          "1m=4", "m-x=4", "m=4=5", "m=281474976710657", "m=99999999999999999999999", "m=0x10"}) {
    EXPECT_THROW(parse_shape_string(bad), InputError) << bad;
  }
}

TEST(ShapeString, MessagesNameTheItem) {
  try {
    parse_shape_string("m=4,n=abc");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'n=abc'"), std::string::npos) << e.what();
  }
}

TEST(ShapeString, OperatorsRejectValuesAbove2To48) {
  const auto& gemm = OperatorRegistry::instance().get("gemm");
  OpInstance inst{"gemm", "", "", {{"m", kMaxShapeValue + 1}}, "", 1};
  EXPECT_THROW(normalize_instance(gemm, inst), InputError);
  inst.shape["m"] = kMaxShapeValue;
  EXPECT_NO_THROW(normalize_instance(gemm, inst));
}
