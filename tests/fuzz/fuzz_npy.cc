// libFuzzer harness: the .npy reader. Any loom::Error is an expected outcome; an array that
// loads must survive save -> load unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/npy.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  loom::NDArray a;
  try {
    a = loom::load_npy_from_bytes(bytes, "fuzz.npy");
  } catch (const loom::Error&) {
    return 0;
  }
  loom::fuzz::check(a.nbytes() <= size, "a loaded array is larger than its file");
  const loom::NDArray b = loom::load_npy_from_bytes(loom::save_npy_to_bytes(a), "resaved.npy");
  loom::fuzz::check(loom::fuzz::same_array(a, b), ".npy save -> load changed the array");
  return 0;
}
