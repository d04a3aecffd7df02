// The `loom` command: run a JSON graph on .npy inputs, or inspect it.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontends/cli/args.h"
#include "frontends/cli/bench.h"
#include "frontends/cli/draw.h"
#include "frontends/cli/ops.h"
#include "frontends/cli/run.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "ops/custom/custom_op.h"
#include "runtime/executor.h"
#include "runtime/npy.h"
#include "runtime/params_io.h"

namespace {

using namespace loom;
using cli::parse_dims;
using cli::split_eq;
using cli::UsageError;

const char* kUsage =
    "usage:\n"
    "  loom info SYMBOL.json [--shape NAME=d1,d2,...] ...\n"
    "      Lists arguments, outputs and auxiliary states with their inferred shapes.\n"
    "  loom draw SYMBOL.json [--shape NAME=d1,d2,...] ... [--show-weights] [-o FILE]\n"
    "      Draws the graph with Graphviz: FILE.dot (DOT text; default: stdout) or\n"
    "      FILE.svg / .png / .pdf (runs Graphviz's dot). --shape labels edges with shapes.\n"
    "  --plugin LIB.so loads a library that registers custom operators (any command).\n";

// kUsage with `loom run`'s lines first and `loom bench`'s and `loom ops`' lines before the
// --plugin note.
std::string usage() {
  std::string u = kUsage;
  u.insert(u.find("  --plugin LIB.so loads"), std::string(cli::kBenchUsage) + cli::kOpsUsage);
  return u.insert(u.find("  loom info"), cli::kRunUsage);
}

int cmd_info(const std::vector<std::string>& args) {
  std::string json;
  std::map<std::string, Shape> shapes;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--shape") {
      if (i + 1 >= args.size()) throw UsageError("--shape needs a value");
      auto [name, dims] = split_eq(args[++i], "--shape");
      shapes[name] = parse_dims(dims);
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option " + a);
    } else if (json.empty()) {
      json = a;
    } else {
      throw UsageError("unexpected argument '" + a + "'");
    }
  }
  if (json.empty()) throw UsageError("info needs a SYMBOL.json");
  Symbol sym = load_json_file(json);
  IndexedGraph g(sym.outputs());
  auto ent = infer_shapes(g, shapes, /*partial=*/true);
  auto show = [&](uint32_t e) {
    const Shape& s = ent[e];
    return s.ndim() == 0 ? std::string("?") : s.str();
  };
  std::map<std::string, int> ops;
  size_t n_ops = 0;
  for (uint32_t i = 0; i < g.num_nodes(); ++i)
    if (!g.node(i).node->is_variable()) ++ops[g.node(i).node->attrs.op->name], ++n_ops;
  std::cout << json << ": " << g.num_nodes() << " nodes (" << n_ops << " ops)\n";
  std::cout << "ops:";
  for (const auto& [k, v] : ops) std::cout << " " << k << "x" << v;
  std::cout << "\narguments:\n";
  for (auto n : g.arguments())
    std::cout << "  " << g.node(n).node->name() << " " << show(g.entry_id(n, 0)) << "\n";
  std::cout << "outputs:\n";
  auto names = sym.list_outputs();
  for (size_t i = 0; i < names.size(); ++i)
    std::cout << "  " << names[i] << " " << show(g.heads()[i]) << "\n";
  std::cout << "auxiliary states:\n";
  for (auto n : g.aux_states())
    std::cout << "  " << g.node(n).node->name() << " " << show(g.entry_id(n, 0)) << "\n";
  return 0;
}

int cmd_draw(const std::vector<std::string>& args) {
  std::string json, out;
  DrawOptions opts;
  bool titled = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "--shape") {
      auto [name, dims] = split_eq(value(), "--shape");
      opts.shapes[name] = parse_dims(dims);
    } else if (a == "-o" || a == "--output")
      out = value();
    else if (a == "--show-weights")
      opts.hide_weights = false;
    else if (a == "--title")
      opts.title = value(), titled = true;
    else if (!a.empty() && a[0] == '-')
      throw UsageError("unknown option " + a);
    else if (json.empty())
      json = a;
    else
      throw UsageError("unexpected argument '" + a + "'");
  }
  if (json.empty()) throw UsageError("draw needs a SYMBOL.json");
  if (!titled) opts.title = std::filesystem::path(json).stem().string();
  std::string dot = to_dot(load_json_file(json), opts);
  if (out.empty() || out == "-")
    std::cout << dot;
  else
    write_drawing(dot, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // gcc's OpenMP reads OMP_WAIT_POLICY before main; spinning threads lose badly on a busy
  // machine, so default to passive by re-executing once with it set (the user's setting wins).
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // on failure, carry on with the default policy
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::cout << usage();
    return args.empty() ? 2 : 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  try {
    // Plugins first, so graphs that use their custom ops load.
    for (size_t i = 0; i < args.size();) {
      if (args[i] != "--plugin") {
        ++i;
        continue;
      }
      if (i + 1 >= args.size()) throw UsageError("--plugin needs a library path");
      load_plugin(args[i + 1]);
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
    }
    if (cmd == "run") return cli::cmd_run(args);
    if (cmd == "info") return cmd_info(args);
    if (cmd == "draw") return cmd_draw(args);
    if (cmd == "bench") return cli::cmd_bench(args);
    if (cmd == "ops") return cli::cmd_ops(args);
    throw UsageError("unknown command '" + cmd + "'");
  } catch (const UsageError& e) {
    std::cerr << "loom: " << e.what() << "\n" << usage();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "loom: error: " << e.what() << "\n";
    return 1;
  }
}
