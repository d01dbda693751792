// Reading the roofline's inputs: run.json and machine.json files, validated on read (errors name
// the file and the field), and telling one kind of file from the other by its schema name.
#pragma once
#include <filesystem>
#include <string>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/run_record.hpp"

namespace rafter::roofline {

enum class InputKind { Run, Machine };

Run load_run(const std::filesystem::path& path);
MachineProfile load_machine(const std::filesystem::path& path);
// The kind named by the file's `schema.name`; throws FormatError naming the file otherwise.
InputKind input_kind(const std::filesystem::path& path);
// A short name for a file in titles and tables: its file name ("run_bf16.json").
std::string input_name(const std::filesystem::path& path);

}  // namespace rafter::roofline
