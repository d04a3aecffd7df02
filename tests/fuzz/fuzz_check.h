// Shared by the fuzz harnesses: a property violation is a finding, reported like a crash.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "runtime/ndarray.h"

namespace loom::fuzz {

/// Aborts (a finding for libFuzzer and a failed replay test) when `ok` is false.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

/// True when a and b have the same shape, dtype and bytes (two none arrays are equal).
inline bool same_array(const NDArray& a, const NDArray& b) {
  if (a.is_none() || b.is_none()) return a.is_none() == b.is_none();
  if (a.shape() != b.shape() || a.dtype() != b.dtype() || a.nbytes() != b.nbytes()) return false;
  std::string x(a.nbytes(), '\0'), y(b.nbytes(), '\0');
  if (!x.empty()) a.copy_to_host(x.data(), x.size());
  if (!y.empty()) b.copy_to_host(y.data(), y.size());
  return x == y;
}

}  // namespace loom::fuzz
