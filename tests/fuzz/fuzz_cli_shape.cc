// libFuzzer harness: the CLI's `--shape NAME=d1,d2,...` values, each input line one value,
// parsed as `loom info/draw` parse them and then used for shape inference of a small
// convolutional network, as `loom info` does. UsageError and loom::Error are expected
// outcomes; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "frontends/cli/args.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// data -> Convolution -> BatchNorm -> relu -> Pooling -> Flatten -> FullyConnected ->
// SoftmaxOutput, plus a Concat of data with a second input `extra`.
const char* kNet = R"json({"nodes": [
  {"op": "null", "name": "data", "inputs": []},
  {"op": "null", "name": "conv_weight", "inputs": []},
  {"op": "null", "name": "conv_bias", "inputs": []},
  {"op": "Convolution", "name": "conv", "attrs": {"kernel": "(3, 3)", "num_filter": "4",
   "pad": "(1, 1)", "stride": "(2, 2)", "dilate": "(2, 2)"}, "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},
  {"op": "null", "name": "bn_gamma", "inputs": []},
  {"op": "null", "name": "bn_beta", "inputs": []},
  {"op": "null", "name": "bn_moving_mean", "inputs": []},
  {"op": "null", "name": "bn_moving_var", "inputs": []},
  {"op": "BatchNorm", "name": "bn", "inputs": [[3, 0, 0], [4, 0, 0], [5, 0, 0], [6, 0, 0], [7, 0, 0]]},
  {"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[8, 0, 0]]},
  {"op": "Pooling", "name": "pool", "attrs": {"kernel": "(2, 2)", "stride": "(2, 2)",
   "pool_type": "max", "pooling_convention": "full"}, "inputs": [[9, 0, 0]]},
  {"op": "Flatten", "name": "flat", "inputs": [[10, 0, 0]]},
  {"op": "null", "name": "fc_weight", "inputs": []},
  {"op": "null", "name": "fc_bias", "inputs": []},
  {"op": "FullyConnected", "name": "fc", "attrs": {"num_hidden": "10"},
   "inputs": [[11, 0, 0], [12, 0, 0], [13, 0, 0]]},
  {"op": "null", "name": "softmax_label", "inputs": []},
  {"op": "SoftmaxOutput", "name": "softmax", "inputs": [[14, 0, 0], [15, 0, 0]]},
  {"op": "null", "name": "extra", "inputs": []},
  {"op": "Concat", "name": "cat", "attrs": {"num_args": "2", "dim": "1"},
   "inputs": [[0, 0, 0], [17, 0, 0]]}
 ],
 "arg_nodes": [0, 1, 2, 4, 5, 6, 7, 12, 13, 15, 17],
 "heads": [[16, 0, 0], [18, 0, 0]],
 "attrs": {"mxnet_version": ["int", 10901]}})json";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  static const Symbol net = load_json(kNet, "fuzz_cli_shape net");
  static const IndexedGraph graph(net.outputs());
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, Shape> shapes;
  try {
    for (size_t start = 0; start <= text.size();) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      auto [name, dims] = cli::split_eq(text.substr(start, end - start), "--shape");
      const Shape s = cli::parse_dims(dims);
      fuzz::check(s.known(), "parse_dims accepted a non-positive dimension");
      shapes[name] = s;
      start = end + 1;
    }
  } catch (const cli::UsageError&) {
    return 0;
  }
  try {
    infer_shapes(graph, shapes, /*partial=*/true);
  } catch (const Error&) {
  }
  return 0;
}
