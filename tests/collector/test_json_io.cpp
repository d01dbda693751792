// Atomic writes, writability checks and the field-naming JSON reader.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"
#include "run_cli.hpp"

using namespace rafter;
namespace fs = std::filesystem;

namespace {
// A fresh folder per test, which the test removes: the process-wide one (process_temp_dir) would be
// gone for the tests after the first when they all run in one process, as the binary alone runs them.
fs::path temp_dir() {
  fs::path d = rafter::testing::make_temp_dir("json");
  if (d.empty()) throw std::runtime_error("mkdtemp failed for rafter-json");
  return d;
}
}  // namespace

TEST(JsonIo, AtomicWriteReplacesAndLeavesNoTemporary) {
  fs::path d = temp_dir();
  fs::path f = d / "out.json";
  write_file_atomic(f, "{\"a\":1}");
  write_file_atomic(f, "{\"a\":2}");
  EXPECT_EQ(read_json_file(f).at("a"), 2);
  int n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(d)) ++n;
  EXPECT_EQ(n, 1);
  fs::remove_all(d);
}

TEST(JsonIo, UnwritablePathsAreInputErrors) {
  EXPECT_THROW(check_writable("/nonexistent-folder/x.json"), InputError);
  EXPECT_THROW(write_file_atomic("/nonexistent-folder/x.json", "{}"), InputError);
  fs::path d = temp_dir();
  EXPECT_THROW(check_writable(d), InputError);  // a folder, not a file
  fs::remove_all(d);
}

TEST(JsonIo, MalformedFileNamesTheFile) {
  fs::path d = temp_dir();
  fs::path f = d / "broken.json";
  std::ofstream(f) << "{\"a\": [1, 2,";
  try {
    read_json_file(f);
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json"), std::string::npos);
  }
  EXPECT_THROW(read_json_file(d / "missing.json"), InputError);
  fs::remove_all(d);
}

TEST(JsonIo, ReaderNamesTheFieldPath) {
  nlohmann::json j = {{"outer", {{"list", {{{"x", "text"}}}}}}};
  JsonReader r(j, "f.json");
  try {
    r.object("outer").element("list", 0).number("x");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "f.json.outer.list[0].x: expected a number");
  }
  try {
    r.string("absent");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "f.json.absent: missing");
  }
  EXPECT_EQ(r.integer_or("absent", 7), 7);
}
