// PNG export: a real PNG of twice the SVG's size (librsvg + cairo); a clear error without them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "rafter/collector/error.hpp"
#include "rafter/roofline/charts.hpp"
#include "rafter/roofline/inputs.hpp"
#include "rafter/roofline/png.hpp"
#include "roofline_test_util.hpp"

namespace rafter::roofline {
namespace {

std::uint32_t be32(const unsigned char* p) { return (p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }

TEST(Png, RendersAtTwiceTheSvgSize) {
  auto path = std::filesystem::temp_directory_path() / ("rafter-test-" + std::to_string(::getpid()) + ".png");
  auto rp = place_run(load_run(test::fixture("run_cpu.json")), load_machine(test::fixture("machine_h100.json")));
  std::string svg = hierarchical_roofline_svg(rp);
  if (!png_supported()) {
    EXPECT_THROW(write_png(svg, path), InputError);
    GTEST_SKIP() << "built without librsvg";
  }
  write_png(svg, path, 2.0);
  std::ifstream f(path, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(f)), {});
  ASSERT_GT(bytes.size(), 10000u);  // a drawn chart, not an empty canvas
  const unsigned char signature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  EXPECT_TRUE(std::equal(signature, signature + 8, bytes.begin()));
  auto svg_attrs = test::svg_elements(svg, "svg");
  ASSERT_EQ(svg_attrs.size(), 1u);
  EXPECT_EQ(be32(&bytes[16]), 2 * std::stoul(svg_attrs[0]["width"]));
  EXPECT_EQ(be32(&bytes[20]), 2 * std::stoul(svg_attrs[0]["height"]));
  std::filesystem::remove(path);
}

TEST(Png, MalformedSvgIsAnInputError) {
  if (!png_supported()) GTEST_SKIP() << "built without librsvg";
  auto path = std::filesystem::temp_directory_path() / "rafter-test-bad.png";
  EXPECT_THROW(write_png("<svg", path), InputError);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace rafter::roofline
