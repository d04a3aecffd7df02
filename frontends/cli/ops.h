// `loom ops`: the operator registry as text, one line per operator.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace loom::cli {

/// The usage lines of `loom ops` (part of the CLI's usage text).
extern const char* kOpsUsage;

/// Writes one line per registered operator, sorted by name:
///   NAME DEVICES DTYPES [ALIAS ...]
/// DEVICES: the devices with a kernel, comma-separated words `cpu`, `gpu` (`-`: none, the
/// op is expanded by a graph pass). DTYPES: the CPU kernel's declared dtypes
/// (LOOM_CPU_DTYPES), comma-separated; `-` when the op declares none (its kernel checks
/// dtypes itself at bind). GPU kernels take float32.
void write_ops(std::ostream& os);

/// Runs `loom ops` with the arguments after the command name; returns the exit code.
int cmd_ops(const std::vector<std::string>& args);

}  // namespace loom::cli
