// Replays fuzz inputs without libFuzzer: `fuzz_replay <target> <file or folder>...` feeds every
// file to the target's entry point, so that the normal (and the sanitized) builds run the corpora
// and the regression inputs as tests. A bug aborts, as it would under the fuzzer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define RAFTER_FUZZ_TARGET(name) extern "C" int rafter_fuzz_##name(const std::uint8_t* data, std::size_t size);
#include "fuzz_targets.inc"
#undef RAFTER_FUZZ_TARGET

namespace {

using Entry = int (*)(const std::uint8_t*, std::size_t);

struct Target {
  const char* name;
  Entry entry;
};

#define RAFTER_FUZZ_TARGET(name) {#name, &rafter_fuzz_##name},
const Target kTargets[] = {
#include "fuzz_targets.inc"
};
#undef RAFTER_FUZZ_TARGET

std::vector<std::filesystem::path> input_files(const std::filesystem::path& where) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_regular_file(where)) {
    files.push_back(where);
  } else if (std::filesystem::is_directory(where)) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(where))
      if (e.is_regular_file() && e.path().filename().string().front() != '.') files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());  // a stable order, so that a failure reproduces
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  const Target* target = nullptr;
  for (const auto& t : kTargets)
    if (argc > 1 && std::strcmp(argv[1], t.name) == 0) target = &t;
  if (!target) {
    std::fprintf(stderr, "usage: fuzz_replay <target> <file or folder>...; targets:");
    for (const auto& t : kTargets) std::fprintf(stderr, " %s", t.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::size_t replayed = 0;
  for (int i = 2; i < argc; ++i) {
    for (const auto& file : input_files(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      std::fprintf(stderr, "%s\n", file.c_str());  // the last name printed is the culprit of an abort
      target->entry(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  std::printf("fuzz_replay %s: %zu input(s), no failure\n", target->name, replayed);
  return 0;
}
