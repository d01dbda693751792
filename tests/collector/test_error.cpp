// Typed errors keep their message on one printable line, whatever user text it quotes.
#include <gtest/gtest.h>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"

using namespace rafter;

TEST(ErrorMessage, ControlCharactersAreEscaped) {
  EXPECT_EQ(one_line("plain"), "plain");
  EXPECT_EQ(one_line("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(one_line(std::string("x\x01y\x7f", 4)), "x\\x01y\\x7f");
  EXPECT_EQ(one_line("naïve"), "naïve");  // UTF-8 is left as it is
}

TEST(ErrorMessage, EveryTypedErrorIsOneLine) {
  EXPECT_STREQ(InputError("unknown model 'a\nb'").what(), "unknown model 'a\\nb'");
  EXPECT_STREQ(FormatError(std::string("f.json.x\n: missing")).what(), "f.json.x\\n: missing");
  EXPECT_STREQ(DeviceUnavailable("no\tGPU").what(), "no\\tGPU");
}

// A field name with a newline, quoted back in the message (the fuzz targets check every message).
TEST(ErrorMessage, FieldNameWithNewlineStaysOneLine) {
  const auto j = parse_json_text(R"({"a\nb": 1})", "x.json");
  try {
    JsonReader(j, "x.json").string("a\nb");
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "x.json.a\\nb: expected a string");
  }
}
