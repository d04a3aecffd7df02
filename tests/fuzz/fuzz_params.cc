// libFuzzer harness: the .params reader, then split_checkpoint. Any loom::Error is an
// expected outcome; a file that loads must survive save -> load unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/params_io.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  NamedArrays p;
  try {
    p = load_params_from_bytes(bytes, "fuzz.params");
  } catch (const Error&) {
    return 0;
  }
  size_t total = 0;
  for (const auto& a : p.arrays) total += a.is_none() ? 0 : a.nbytes();
  fuzz::check(total <= size, "loaded arrays are larger than their file");
  fuzz::check(p.names.empty() || p.names.size() == p.arrays.size(), "names do not match arrays");

  const NamedArrays q = load_params_from_bytes(save_params_to_bytes(p), "resaved.params");
  fuzz::check(q.names == p.names && q.arrays.size() == p.arrays.size(),
              ".params save -> load changed the names or the count");
  for (size_t i = 0; i < p.arrays.size(); ++i)
    fuzz::check(fuzz::same_array(p.arrays[i], q.arrays[i]), ".params save -> load changed an array");

  try {
    const CheckpointParams ck = split_checkpoint(p, "fuzz.params");
    fuzz::check(ck.arg.size() + ck.aux.size() == p.size(), "split_checkpoint lost arrays");
    const NamedArrays joined = join_checkpoint(ck);
    fuzz::check(joined.size() == p.size(), "join_checkpoint lost arrays");
  } catch (const Error&) {
  }
  return 0;
}
