// Reading and writing rafter's JSON files: atomic writes (temp file + rename), parse errors as
// FormatError naming the file, and typed field access that names the field path on error.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace rafter {

// Writes `text` to `path` atomically: a temporary file in the same folder, flushed, then renamed.
// Throws InputError naming the path when it cannot be written.
void write_file_atomic(const std::filesystem::path& path, std::string_view text);

// Writes a measured result (run.json, machine.json) like write_file_atomic; when that fails (a full
// disk, a folder removed meanwhile) it saves a copy in the temporary folder ($TMPDIR) so that the
// measuring is not lost, and the InputError then names both paths.
void write_measured_file(const std::filesystem::path& path, std::string_view text);

// Checks that `path` can be written (folder exists and is writable) before any measuring starts,
// so that a bad output path fails fast. Throws InputError.
void check_writable(const std::filesystem::path& path);

nlohmann::json read_json_file(const std::filesystem::path& path);  // InputError / FormatError
// Parses JSON text; a syntax error is a FormatError naming `origin` (read_json_file's parser, kept
// apart from the file so that the fuzz targets reach it without one).
nlohmann::json parse_json_text(std::string_view text, std::string_view origin);

inline constexpr double kMinQuantity = 1e-30, kMaxQuantity = 1e30;  // JsonReader::quantity's range

// Typed access to a required or optional field; `where` is the path so far, e.g. "run.json: records[2]".
// Errors read "<where>.<key>: missing" or "<where>.<key>: expected <type>".
class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string where);
  const nlohmann::json& raw() const { return j_; }
  const std::string& where() const { return where_; }
  bool has(std::string_view key) const;
  double number(std::string_view key) const;
  double number_or(std::string_view key, double fallback) const;
  // A physical quantity (FLOPs, bytes, seconds, rates, counts): 0 or within [1e-30, 1e30]. Beyond
  // that no measurement lies, and the roofline's products and ratios of such figures stay finite.
  double quantity(std::string_view key) const;
  double quantity_or(std::string_view key, double fallback) const;
  std::int64_t integer(std::string_view key) const;
  std::int64_t integer_or(std::string_view key, std::int64_t fallback) const;
  std::string string(std::string_view key) const;
  std::string string_or(std::string_view key, std::string fallback) const;
  bool boolean(std::string_view key) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  JsonReader object(std::string_view key) const;
  const nlohmann::json& array(std::string_view key) const;  // required array
  JsonReader element(std::string_view array_key, std::size_t i) const;
  [[noreturn]] void fail(std::string_view key, std::string_view what) const;

 private:
  const nlohmann::json& field(std::string_view key) const;
  const nlohmann::json& j_;
  std::string where_;
};

// Checks `schema.name` and `schema.version`.
void check_schema(const JsonReader& r, std::string_view name, int version);

}  // namespace rafter
