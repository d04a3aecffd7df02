// `loom bench`: inference latency and throughput of a JSON graph, with an optional per-op
// time table and the oneDNN implementation of each heavy op (the deployer's perf tool).
#pragma once

#include <string>
#include <vector>

namespace loom::cli {

/// The usage lines of `loom bench` (part of the CLI's usage text).
extern const char* kBenchUsage;

/// Runs `loom bench` with the arguments after the command name; returns the exit code.
/// Throws UsageError on a bad command line and loom errors on a bad graph.
int cmd_bench(const std::vector<std::string>& args);

}  // namespace loom::cli
