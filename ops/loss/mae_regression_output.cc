// MAERegressionOutput: y = x; grad = (grad_scale / K) * s, s = +1 if y - label > 0 else -1
// (an exact match gives -1, as MXNet's minus_sign). The head gradient is ignored.
#include "ops/loss/regression_output.h"

namespace loom {
namespace {

[[maybe_unused]] OpDef& kMaeRegistered = loss::register_regression_output<loss::MAERegression>(
    "MAERegressionOutput",
    "Identity in forward; in backward the (sub)gradient of the absolute loss "
        "sum(|data - label|) / K, with -1 where data == label.")
    .sample({.attrs = {}, .in_shapes = {{3, 4}, {3, 4}}, .in_kinds = {}, .check_grad = false})
    .sample({.attrs = {{"grad_scale", "2"}},
             .in_shapes = {{4, 1}, {4}},
             .in_kinds = {},
             .check_grad = false});

}  // namespace
}  // namespace loom
