// `loom run`: inference of a JSON graph on .npy inputs, on the CPU or a GPU (--device).
#pragma once

#include <string>
#include <vector>

#include "runtime/base.h"

namespace loom::cli {

/// The usage lines of `loom run` (part of the CLI's usage text).
extern const char* kRunUsage;

/// Parses --device's value: "cpu", "cpu:0", "gpu" (= gpu:0) or "gpu:N". Throws UsageError.
Device parse_device(const std::string& s);

/// Runs `loom run` with the arguments after the command name; returns the exit code.
/// Throws UsageError on a bad command line, loom errors on a bad graph or an absent device.
int cmd_run(const std::vector<std::string>& args);

}  // namespace loom::cli
