// Atomic file writes and validated JSON reading with field-path error messages.
#include "rafter/collector/json_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/core.h>
#include <fstream>
#include <sstream>

#include "rafter/collector/error.hpp"

namespace rafter {
namespace fs = std::filesystem;

namespace {
fs::path parent_or_dot(const fs::path& p) {
  auto parent = p.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}
}  // namespace

void check_writable(const fs::path& path) {
  const fs::path dir = parent_or_dot(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(fmt::format("cannot write '{}': folder '{}' does not exist", path.string(), dir.string()));
  if (fs::is_directory(path, ec))
    throw InputError(fmt::format("cannot write '{}': it is a folder", path.string()));
  if (access(dir.c_str(), W_OK) != 0)
    throw InputError(fmt::format("cannot write '{}': folder '{}' is not writable", path.string(), dir.string()));
  if (fs::exists(path, ec) && access(path.c_str(), W_OK) != 0)
    throw InputError(fmt::format("cannot write '{}': file is not writable", path.string()));
}

void write_file_atomic(const fs::path& path, std::string_view text) {
  check_writable(path);
  std::string name = path.filename().string();
  name.insert(0, 1, '.');
  name.append(".tmpXXXXXX");
  std::string tmpl = (parent_or_dot(path) / name).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0) throw InputError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      throw InputError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(err)));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmpl.c_str());
    throw InputError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  }
  ::chmod(tmpl.c_str(), 0644);
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    throw InputError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(err)));
  }
}

void write_measured_file(const fs::path& path, std::string_view text) {
  try {
    write_file_atomic(path, text);
  } catch (const InputError& e) {
    std::error_code ec;
    const fs::path rescue = fs::temp_directory_path(ec) /
                            fmt::format("rafter-{}-{}{}", path.stem().string(), ::getpid(), path.extension().string());
    try {
      write_file_atomic(rescue, text);
    } catch (const InputError&) {
      throw InputError(fmt::format("{} (and no copy could be saved in {})", e.what(), rescue.parent_path().string()));
    }
    throw InputError(fmt::format("{}; the results are saved in {}", e.what(), rescue.string()));
  }
}

nlohmann::json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("cannot read '{}': {}", path.string(), std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json_text(ss.str(), path.string());
}

nlohmann::json parse_json_text(std::string_view text, std::string_view origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number beyond double's range (2e308): JSON has no
    // infinity, and a ceiling or a time of inf would poison every figure computed from it.
    std::string msg = e.what();
    // nlohmann's messages start with "[json.exception.parse_error.101] "; keep the useful part.
    if (auto pos = msg.find("] "); pos != std::string::npos) msg = msg.substr(pos + 2);
    throw FormatError(fmt::format("{}: not valid JSON: {}", origin, msg));
  }
}

JsonReader::JsonReader(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {
  if (!j_.is_object()) throw FormatError(fmt::format("{}: expected an object", where_));
}

void JsonReader::fail(std::string_view key, std::string_view what) const {
  throw FormatError(fmt::format("{}.{}: {}", where_, key, what));
}

bool JsonReader::has(std::string_view key) const { return j_.contains(key) && !j_.at(std::string(key)).is_null(); }

const nlohmann::json& JsonReader::field(std::string_view key) const {
  auto it = j_.find(key);
  if (it == j_.end()) fail(key, "missing");
  return *it;
}

double JsonReader::number(std::string_view key) const {
  const auto& v = field(key);
  if (!v.is_number()) fail(key, "expected a number");
  return v.get<double>();
}
double JsonReader::number_or(std::string_view key, double fallback) const {
  return has(key) ? number(key) : fallback;
}
double JsonReader::quantity(std::string_view key) const {
  const double v = number(key);
  if (!(v == 0 || (v >= kMinQuantity && v <= kMaxQuantity)))
    fail(key, fmt::format("expected 0 or a value in [1e-30, 1e30], got {}", v));
  return v;
}
double JsonReader::quantity_or(std::string_view key, double fallback) const {
  return has(key) ? quantity(key) : fallback;
}
std::int64_t JsonReader::integer(std::string_view key) const {
  const auto& v = field(key);
  if (!v.is_number_integer()) fail(key, "expected an integer");
  // An unsigned value above int64's range would wrap to a negative one.
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) fail(key, "integer out of range");
  return v.get<std::int64_t>();
}
std::int64_t JsonReader::integer_or(std::string_view key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}
std::string JsonReader::string(std::string_view key) const {
  const auto& v = field(key);
  if (!v.is_string()) fail(key, "expected a string");
  return v.get<std::string>();
}
std::string JsonReader::string_or(std::string_view key, std::string fallback) const {
  return has(key) ? string(key) : fallback;
}
bool JsonReader::boolean(std::string_view key) const {
  const auto& v = field(key);
  if (!v.is_boolean()) fail(key, "expected true or false");
  return v.get<bool>();
}
bool JsonReader::boolean_or(std::string_view key, bool fallback) const {
  return has(key) ? boolean(key) : fallback;
}
JsonReader JsonReader::object(std::string_view key) const {
  const auto& v = field(key);
  if (!v.is_object()) fail(key, "expected an object");
  return JsonReader(v, fmt::format("{}.{}", where_, key));
}
const nlohmann::json& JsonReader::array(std::string_view key) const {
  const auto& v = field(key);
  if (!v.is_array()) fail(key, "expected an array");
  return v;
}
JsonReader JsonReader::element(std::string_view array_key, std::size_t i) const {
  const auto& a = array(array_key);
  const auto& v = a.at(i);
  if (!v.is_object()) throw FormatError(fmt::format("{}.{}[{}]: expected an object", where_, array_key, i));
  return JsonReader(v, fmt::format("{}.{}[{}]", where_, array_key, i));
}

void check_schema(const JsonReader& r, std::string_view name, int version) {
  JsonReader s = r.object("schema");
  if (s.string("name") != name)
    s.fail("name", fmt::format("expected \"{}\", found \"{}\"", name, s.string("name")));
  if (s.integer("version") != version)
    s.fail("version", fmt::format("unsupported version {} (this rafter reads {})", s.integer("version"), version));
}

}  // namespace rafter
