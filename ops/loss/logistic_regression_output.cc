// LogisticRegressionOutput: y = sigmoid(x); grad = (grad_scale / K) * (y - label)
// (spec 4.2), the gradient of the binary cross-entropy. The head gradient is ignored.
#include "ops/loss/regression_output.h"

namespace loom {
namespace {

[[maybe_unused]] OpDef& kLogisticRegistered =
    loss::register_regression_output<loss::LogisticRegression>(
        "LogisticRegressionOutput",
        "Sigmoid in forward; in backward the gradient of the binary cross-entropy "
        "(sigmoid(data) - label) * grad_scale / K, K = outputs per sample.")
        .sample({.attrs = {},
                 .in_shapes = {{3, 4}, {3, 4}},
                 .in_kinds = {"normal", "label:2"},
                 .check_grad = false})
        .sample({.attrs = {{"grad_scale", "3"}},
                 .in_shapes = {{5, 1}, {5}},
                 .in_kinds = {"normal", "label:2"},
                 .check_grad = false});

}  // namespace
}  // namespace loom
