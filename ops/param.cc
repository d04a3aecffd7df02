#include "ops/param.h"

#include "ops/float_tuple.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace loom {
namespace {
std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}
std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
// Splits "(a, b, c)" / "[a,b]" / "a" into trimmed items; "()" gives none.
std::vector<std::string> tuple_items(const std::string& text) {
  std::string s = trim(text);
  if (!s.empty() && (s.front() == '(' || s.front() == '[')) {
    char close = s.front() == '(' ? ')' : ']';
    if (s.back() != close) throw ParamError("cannot parse '" + text + "' as a tuple");
    s = s.substr(1, s.size() - 2);
  }
  std::vector<std::string> items;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      items.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  cur = trim(cur);
  if (!cur.empty()) items.push_back(cur);
  for (const auto& it : items)
    if (it.empty()) throw ParamError("cannot parse '" + text + "' as a tuple");
  return items;
}
}  // namespace

bool parse_bool(const std::string& text) {
  std::string s = lower(trim(text));
  if (s == "true" || s == "1") return true;
  if (s == "false" || s == "0") return false;
  throw ParamError("cannot parse '" + text + "' as a boolean");
}

int64_t parse_int(const std::string& text) {
  std::string s = trim(text);
  if (!s.empty() && (s.back() == 'L' || s.back() == 'l')) s.pop_back();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') {
    // Accept integral floats such as "3.0", which some exporters write; the range check
    // keeps 1e300 and inf away from the (undefined) out-of-range conversion.
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && d == std::floor(d) && d >= -0x1p63 && d < 0x1p63)
      return static_cast<int64_t>(d);
    throw ParamError("cannot parse '" + text + "' as an integer");
  }
  if (errno == ERANGE) throw ParamError("integer '" + text + "' is out of range (more than 64 bits)");
  return v;
}

double parse_float(const std::string& text) {
  std::string s = trim(text);
  std::string l = lower(s);
  if (l == "inf" || l == "+inf") return INFINITY;
  if (l == "-inf") return -INFINITY;
  if (l == "nan") return NAN;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') throw ParamError("cannot parse '" + text + "' as a number");
  return v;
}

void check_input_count(int64_t n, const char* key, int64_t lo) {
  if (n < lo || n > kMaxVariadicInputs)
    throw ParamError(std::string(key) + " " + std::to_string(n) + " is out of range (" +
                     std::to_string(lo) + ".." + std::to_string(kMaxVariadicInputs) + ")");
}

Shape parse_shape(const std::string& text) {
  if (trim(text) == "None") return Shape();
  Shape out;
  for (const auto& it : tuple_items(text)) {
    if (it == "None") throw ParamError("cannot parse '" + text + "' as a tuple of integers");
    try {
      out.push_back(parse_int(it));
    } catch (const ParamError&) {
      throw ParamError("cannot parse '" + text + "' as a tuple of integers");
    }
  }
  return out;
}

std::vector<double> parse_double_tuple(const std::string& text, const std::string& name) {
  std::vector<double> out;
  try {
    for (const auto& it : tuple_items(text)) out.push_back(parse_float(it));
  } catch (const ParamError&) {
    throw ParamError("parameter '" + name + "': cannot read '" + text + "' as a tuple of floats");
  }
  return out;
}

std::vector<float> parse_float_tuple(const std::string& text, const std::string& name) {
  const std::vector<double> d = parse_double_tuple(text, name);
  return std::vector<float>(d.begin(), d.end());
}

std::vector<std::optional<int64_t>> parse_optional_tuple(const std::string& text) {
  std::vector<std::optional<int64_t>> out;
  for (const auto& it : tuple_items(text)) {
    if (it == "None") out.push_back(std::nullopt);
    else out.push_back(parse_int(it));
  }
  return out;
}

std::string format_float32(float v) {
  if (std::isinf(v) || std::isnan(v)) return format_float(v);
  char buf[64];
  for (int prec = 1; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return format_float(std::strtod(buf, nullptr));
}

std::string format_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  // Python's repr: the shortest digits that read back exactly, in fixed notation for
  // 1e-4 <= |v| < 1e16 ("2000.0", "0.001") and scientific otherwise ("1e-05", "1e+16").
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string e = buf;
  size_t epos = e.find('e');
  int exp = std::atoi(e.c_str() + epos + 1);
  std::string mant = e.substr(0, epos);
  if (exp < -4 || exp >= 16) {
    char out[64];
    std::snprintf(out, sizeof out, "%se%c%02d", mant.c_str(), exp < 0 ? '-' : '+', std::abs(exp));
    std::string r = out;
    auto dot = r.find('.');
    if (dot != std::string::npos && r.find_first_not_of("0", dot + 1) == r.find('e')) r.erase(dot, r.find('e') - dot);
    return r;
  }
  int decimals = std::max(prec - 1 - exp, 1);
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace loom
