// Float tuples in parameter strings ("(0.5, 1, 2)", "[0.1, 0.2]", "0.75"), for ops whose
// parameters are lists of floats (anchor scales and ratios, box variances). Kept out of
// ops/param.h so its users do not rebuild everything that includes the parameter layer.
#pragma once

#include <string>
#include <vector>

namespace loom {

/// The floats of `text`; throws ParamError "parameter '<name>': cannot read ..." otherwise.
std::vector<double> parse_double_tuple(const std::string& text, const std::string& name);
/// parse_double_tuple rounded to float.
std::vector<float> parse_float_tuple(const std::string& text, const std::string& name);

}  // namespace loom
