// Parsing of the `loom` command's argument values (`--shape data=1,3,224,224`,
// `--input data=x.npy`), kept apart from main.cc so the fuzz harness and tests can call it.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/base.h"

namespace loom::cli {

/// A bad command line: the CLI prints the message and the usage text and exits with 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Splits "NAME=VALUE" at the first '='; throws UsageError naming `flag` when there is no
/// '=' or the name is empty.
std::pair<std::string, std::string> split_eq(const std::string& s, const char* flag);
/// Parses "d1,d2,..." of positive integers; throws UsageError quoting `s` otherwise.
Shape parse_dims(const std::string& s);

}  // namespace loom::cli
