// Typed errors. Libraries throw these at the point of discovery with a one-line message;
// the CLI prints `rafter: error: <message>` and exits 2 for InputError and its children.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace rafter {

// The message as one printable line: control characters (a newline in a field name or a value
// the user wrote, quoted back in the message) become escapes (\n, \t, \xNN), so that
// `rafter: error: ...` stays one line for the scripts that read it.
inline std::string one_line(std::string_view message) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(message.size());
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

// Bad input from the user or the environment: a malformed file, an unknown name, a size that
// does not fit, a missing GPU or counter permission. Exit code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::string_view message) : std::runtime_error(one_line(message)) {}
  explicit InputError(const std::string& message) : InputError(std::string_view(message)) {}
  explicit InputError(const char* message) : InputError(std::string_view(message)) {}
};

// A file that does not match its schema; the message names the file and the field path.
class FormatError : public InputError {
 public:
  using InputError::InputError;
};

// A device (GPU, ISA, counter) that this machine does not have.
class DeviceUnavailable : public InputError {
 public:
  using InputError::InputError;
};

}  // namespace rafter
