// loom._loom: the compiled half of the `loom` Python package.
#include "common.h"

PYBIND11_MODULE(_loom, m) {
  m.doc() = "Loom engine bindings (use the `loom` package, not this module directly)";
  using namespace loom::pyb;
  init_errors(m);
  init_context(m);
  init_ndarray(m);
  init_symbol(m);
  init_executor(m);
  init_registry(m);
  init_imperative(m);
  init_params(m);
  init_custom_op(m);
  init_step(m);
  init_dist(m);
}
