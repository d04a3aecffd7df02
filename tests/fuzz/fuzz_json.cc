// libFuzzer harness: MXNet symbol JSON -> load_json -> save/load round trip -> shape and type
// inference (unknown argument shapes get small guesses) -> simple_bind -> forward (and a
// training step when the graph is small). Any loom::Error is an expected outcome; anything
// else (a crash, a sanitizer report, another exception, a broken round trip) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "graph/infer.h"
#include "graph/json.h"
#include "runtime/executor.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace loom;

// Bytes all forward entries may take (at 8 bytes per element) before the bind is skipped:
// legitimately huge graphs are not findings, and the fuzzer must not run out of memory.
constexpr uint64_t kMaxForwardBytes = 16u << 20;
// Below this the harness also runs a training forward and backward.
constexpr uint64_t kMaxTrainBytes = 2u << 20;

// Shapes tried, in order, for an argument nothing determines (data, labels). The larger
// images fit the face-detection and recognition models of the corpus.
const std::vector<Shape> kGuesses = {Shape{1, 3, 16, 16}, Shape{2, 8},           Shape{1, 1, 8, 8},
                                     Shape{4},            Shape{1, 3, 48, 48}, Shape{1, 3, 112, 112}};

// Elements of `s`, or false when the count overflows.
bool count(const Shape& s, uint64_t* n) {
  *n = 1;
  for (int64_t d : s)
    if (d < 0 || __builtin_mul_overflow(*n, static_cast<uint64_t>(d), n)) return false;
  return true;
}

// Gives every variable whose shape inference leaves unknown a small shape. Returns false when
// no guess makes inference succeed.
bool guess_shapes(const IndexedGraph& g, std::map<std::string, Shape>* given) {
  for (size_t round = 0; round < 2 * g.variables().size() + 1; ++round) {
    const std::vector<Shape> ent = infer_shapes(g, *given, /*partial=*/true);
    const Node* unknown = nullptr;
    Shape partial;
    for (uint32_t v : g.variables()) {
      const Shape& s = ent[g.entry_id(v, 0)];
      if (s.known() || given->count(g.node(v).node->name())) continue;
      unknown = g.node(v).node;
      partial = s;
      break;
    }
    if (!unknown) return true;
    if (partial.ndim() > 0) {  // some dimensions known: fill the others
      for (auto& d : partial.dims())
        if (d <= 0) d = 2;
      (*given)[unknown->name()] = partial;
      continue;
    }
    bool ok = false;
    for (const Shape& s : kGuesses) {
      (*given)[unknown->name()] = s;
      try {
        infer_shapes(g, *given, /*partial=*/true);
        ok = true;
        break;
      } catch (const ShapeError&) {
      }
    }
    if (!ok) return false;
  }
  return true;
}

// LOOM_FUZZ_VERBOSE=1 prints how far each input got (to see what a corpus exercises).
void note(const char* stage, const char* detail = "") {
  static const bool verbose = std::getenv("LOOM_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "  fuzz_json: %s %s\n", stage, detail);
}

void run_graph(const Symbol& sym) {
  const IndexedGraph g(sym.outputs());
  std::map<std::string, Shape> given;
  if (!guess_shapes(g, &given)) return note("no shapes found");
  const std::vector<Shape> ent = infer_shapes(g, given, /*partial=*/false);
  infer_types(g, {});
  uint64_t total = 0;
  for (const Shape& s : ent) {
    uint64_t n = 0;
    if (!count(s, &n) || __builtin_mul_overflow(n, 8, &n) || __builtin_add_overflow(total, n, &total))
      return;
  }
  if (total > kMaxForwardBytes) return note("skipped: too large");
  BindOptions opts;
  opts.default_req = total <= kMaxTrainBytes ? Req::kWrite : Req::kNull;
  auto ex = Executor::simple_bind(sym, given, opts);
  ex->forward(false);
  if (opts.default_req == Req::kWrite) {
    ex->forward(true);
    std::vector<NDArray> head_grads(ex->outputs().size());
    for (size_t i = 0; i < head_grads.size(); ++i)
      if (ex->needs_head_grad(i))
        head_grads[i] = NDArray::full(ex->outputs()[i].shape(), 1.0, ex->outputs()[i].dtype());
    ex->backward(head_grads);
  }
  note(opts.default_req == Req::kWrite ? "ran forward and backward" : "ran forward");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Symbol sym;
  try {
    sym = load_json(text, "fuzz.json");
  } catch (const Error&) {
    note("load failed");
    return 0;
  }
  // Whatever loads must save to JSON that loads back to the same graph.
  const std::string saved = save_json(sym);
  try {
    fuzz::check(save_json(load_json(saved, "resaved.json")) == saved,
                "save_json(load_json(save_json(x))) != save_json(x)");
  } catch (const Error& e) {
    std::fprintf(stderr, "reloading the saved graph failed: %s\n", e.what());
    fuzz::check(false, "a loaded graph saves to JSON that does not load");
  }
  try {
    run_graph(sym);
  } catch (const Error& e) {
    note("error:", e.what());
  }
  return 0;
}
