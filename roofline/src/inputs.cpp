// Loading run.json / machine.json for the roofline verbs.
#include "rafter/roofline/inputs.hpp"

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"

namespace rafter::roofline {

Run load_run(const std::filesystem::path& path) { return run_from_json(read_json_file(path), path.string()); }

MachineProfile load_machine(const std::filesystem::path& path) {
  return machine_profile_from_json(read_json_file(path), path.string());
}

InputKind input_kind(const std::filesystem::path& path) {
  nlohmann::json j = read_json_file(path);
  const nlohmann::json* name = nullptr;
  if (j.is_object() && j.contains("schema") && j["schema"].is_object() && j["schema"].contains("name"))
    name = &j["schema"]["name"];
  if (name && name->is_string() && name->get<std::string>() == kRunSchemaName) return InputKind::Run;
  if (name && name->is_string() && name->get<std::string>() == kMachineSchemaName) return InputKind::Machine;
  throw FormatError(path.string() + ".schema.name: expected \"" + kRunSchemaName + "\" or \"" + kMachineSchemaName + "\"");
}

std::string input_name(const std::filesystem::path& path) { return path.filename().string(); }

}  // namespace rafter::roofline
