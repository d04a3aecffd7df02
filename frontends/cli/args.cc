#include "frontends/cli/args.h"

namespace loom::cli {

std::pair<std::string, std::string> split_eq(const std::string& s, const char* flag) {
  auto p = s.find('=');
  if (p == std::string::npos || p == 0)
    throw UsageError(std::string(flag) + " expects NAME=VALUE, got '" + s + "'");
  return {s.substr(0, p), s.substr(p + 1)};
}

Shape parse_dims(const std::string& s) {
  Shape out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    std::string tok = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    try {
      size_t used = 0;
      long long v = std::stoll(tok, &used);
      if (used != tok.size() || v <= 0) throw std::invalid_argument(tok);
      out.push_back(v);
    } catch (const std::exception&) {
      throw UsageError("bad shape '" + s + "' (expected positive integers like 1,3,224,224)");
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace loom::cli
