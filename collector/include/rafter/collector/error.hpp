// Typed errors. Libraries throw these at the point of discovery with a one-line message;
// the CLI prints `rafter: error: <message>` and exits 2 for InputError and its children.
#pragma once
#include <stdexcept>
#include <string>

namespace rafter {

// Bad input from the user or the environment: a malformed file, an unknown name, a size that
// does not fit, a missing GPU or counter permission. Exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
