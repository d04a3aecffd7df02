// LinearRegressionOutput: y = x; grad = (grad_scale / K) * (y - label) (spec 4.2), the
// gradient of 0.5 * sum((x - label)^2) / K. The head gradient is ignored.
#include "ops/loss/regression_output.h"

namespace loom {
namespace {

[[maybe_unused]] OpDef& kLinearRegistered =
    loss::register_regression_output<loss::LinearRegression>(
        "LinearRegressionOutput",
        "Identity in forward; in backward the gradient of the squared loss "
        "0.5 * sum((data - label)^2) / K, K = outputs per sample.")
        .sample({.attrs = {}, .in_shapes = {{3, 4}, {3, 4}}, .in_kinds = {}, .check_grad = false})
        .sample({.attrs = {{"grad_scale", "0.5"}},
                 .in_shapes = {{5, 1}, {5}},
                 .in_kinds = {},
                 .check_grad = false})
        .sample(
            {.attrs = {}, .in_shapes = {{2, 3, 2}, {2, 6}}, .in_kinds = {}, .check_grad = false});

}  // namespace
}  // namespace loom
