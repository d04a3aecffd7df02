// Operator parameters, declared once: parsing from MXNet's string attributes, defaults,
// validation, error messages, docs and the Python keyword list all come from one schema.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/base.h"

namespace loom {

/// Node attributes exactly as MXNet writes them: every value is a string.
using Attrs = std::map<std::string, std::string>;

/// Describes one parameter for docs, Python signatures and `loom info`.
struct ParamInfo {
  std::string name;
  std::string type;         ///< "int", "float", "boolean", "Shape(tuple)", "string", ...
  std::string default_str;  ///< Default as MXNet prints it; empty when required.
  bool required = false;
  std::vector<std::string> choices;  ///< Allowed values for enum-like strings.
  std::string doc;
};

// String -> value conversions, following MXNet's rules (see spec/mxnet.md 1.4).
// Each throws ParamError with a message naming the text it could not read.
bool parse_bool(const std::string& s);
int64_t parse_int(const std::string& s);
double parse_float(const std::string& s);
/// "(3, 3)", "[3,3]", "3", "(3,)", "()", "(3L, 3L)"; "None" gives an empty shape.
Shape parse_shape(const std::string& s);
/// A tuple whose entries may be "None" (returned as nullopt), e.g. slice begin/end.
std::vector<std::optional<int64_t>> parse_optional_tuple(const std::string& s);
/// Most inputs a variadic op takes (num_args, num_tensors): input names are made per input,
/// so a hostile count must be refused before anything is allocated.
constexpr int64_t kMaxVariadicInputs = 65536;
/// Throws ParamError "<key> <n> is out of range (lo..kMaxVariadicInputs)" unless n is in it.
void check_input_count(int64_t n, const char* key, int64_t lo = 1);
/// Formats a float the way Python's str() would for typical values ("1e-05", "0.5").
std::string format_float(double v);
/// The shortest decimal that reads back as the same float ("0.9", not "0.899999976").
std::string format_float32(float v);

namespace detail {
template <class T> struct ParamCodec;
template <> struct ParamCodec<bool> {
  static bool parse(const std::string& s) { return parse_bool(s); }
  static std::string str(bool v) { return v ? "True" : "False"; }
  static const char* type() { return "boolean"; }
};
template <> struct ParamCodec<int> {
  static int parse(const std::string& s) {
    const int64_t v = parse_int(s);
    if (v < INT32_MIN || v > INT32_MAX)
      throw ParamError("integer '" + s + "' does not fit 32 bits");
    return static_cast<int>(v);
  }
  static std::string str(int v) { return std::to_string(v); }
  static const char* type() { return "int"; }
};
template <> struct ParamCodec<int64_t> {
  static int64_t parse(const std::string& s) { return parse_int(s); }
  static std::string str(int64_t v) { return std::to_string(v); }
  static const char* type() { return "long"; }
};
template <> struct ParamCodec<float> {
  static float parse(const std::string& s) { return static_cast<float>(parse_float(s)); }
  static std::string str(float v) { return format_float32(v); }
  static const char* type() { return "float"; }
};
template <> struct ParamCodec<double> {
  static double parse(const std::string& s) { return parse_float(s); }
  static std::string str(double v) { return format_float(v); }
  static const char* type() { return "double"; }
};
template <> struct ParamCodec<std::string> {
  static std::string parse(const std::string& s) { return s; }
  static std::string str(const std::string& v) { return v; }
  static const char* type() { return "string"; }
};
template <> struct ParamCodec<Shape> {
  static Shape parse(const std::string& s) { return parse_shape(s); }
  static std::string str(const Shape& v) { return v.str(); }
  static const char* type() { return "Shape(tuple)"; }
};
template <class T> struct ParamCodec<std::optional<T>> {
  static std::optional<T> parse(const std::string& s) {
    if (s == "None") return std::nullopt;
    return ParamCodec<T>::parse(s);
  }
  static std::string str(const std::optional<T>& v) {
    return v ? ParamCodec<T>::str(*v) : std::string("None");
  }
  static std::string type_str() { return std::string(ParamCodec<T>::type()) + " or None"; }
  static const char* type() {
    static const std::string t = type_str();
    return t.c_str();
  }
};
}  // namespace detail

/// The schema of a parameter struct P. Example:
///
///   struct FCParam { int64_t num_hidden; bool no_bias; bool flatten; };
///   ParamSchema<FCParam>()
///       .required("num_hidden", &FCParam::num_hidden, "Number of hidden units.")
///       .optional("no_bias", &FCParam::no_bias, false, "Disable bias.")
///       .optional("flatten", &FCParam::flatten, true, "Flatten the input.");
///
/// `parse` ignores keys it does not know (old files carry removed parameters) and every
/// `__hidden__` key.
template <class P>
class ParamSchema {
 public:
  template <class T>
  ParamSchema& required(const char* name, T P::*member, const char* doc) {
    return add<T>(name, member, std::nullopt, doc, {});
  }
  template <class T, class D>
  ParamSchema& optional(const char* name, T P::*member, D def, const char* doc) {
    return add<T>(name, member, std::optional<T>(T(def)), doc, {});
  }
  /// A string parameter restricted to `choices`.
  ParamSchema& choice(const char* name, std::string P::*member, std::vector<std::string> choices,
                      std::optional<std::string> def, const char* doc) {
    return add<std::string>(name, member, std::move(def), doc, std::move(choices));
  }
  /// Runs after all fields are set; throws ParamError for inconsistent values.
  ParamSchema& check(std::function<void(P&)> fn) {
    check_ = std::move(fn);
    return *this;
  }

  P parse(const Attrs& attrs) const {
    P p{};
    for (const auto& f : fields_) f.apply(p, attrs);
    if (check_) check_(p);
    return p;
  }
  std::vector<ParamInfo> info() const {
    std::vector<ParamInfo> v;
    for (const auto& f : fields_) v.push_back(f.info);
    return v;
  }

 private:
  struct Field {
    ParamInfo info;
    std::function<void(P&, const Attrs&)> apply;
  };
  template <class T>
  ParamSchema& add(const char* name, T P::*member, std::optional<T> def, const char* doc,
                   std::vector<std::string> choices) {
    Field f;
    f.info.name = name;
    f.info.type = detail::ParamCodec<T>::type();
    f.info.required = !def.has_value();
    if (def) f.info.default_str = detail::ParamCodec<T>::str(*def);
    f.info.choices = choices;
    f.info.doc = doc;
    std::string key = name;
    f.apply = [key, member, def, choices](P& p, const Attrs& attrs) {
      auto it = attrs.find(key);
      if (it == attrs.end()) {
        if (!def) throw ParamError("required parameter '" + key + "' is missing");
        p.*member = *def;
        return;
      }
      try {
        p.*member = detail::ParamCodec<T>::parse(it->second);
      } catch (const ParamError& e) {
        throw ParamError("parameter '" + key + "': " + e.what());
      }
      if constexpr (std::is_same_v<T, std::string>) {
        if (!choices.empty()) {
          bool ok = false;
          for (const auto& c : choices) ok = ok || c == it->second;
          if (!ok) {
            std::string all;
            for (const auto& c : choices) all += (all.empty() ? "" : ", ") + c;
            throw ParamError("parameter '" + key + "': invalid value '" + it->second +
                             "' (expected one of " + all + ")");
          }
        }
      }
    };
    fields_.push_back(std::move(f));
    return *this;
  }
  std::vector<Field> fields_;
  std::function<void(P&)> check_;
};

}  // namespace loom
