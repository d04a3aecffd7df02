// Reading and writing MXNet `.params` files (the NDArray-list container that `nd.save`,
// `save_checkpoint` and Gluon `save_parameters` write), plus the file helpers they share.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/ndarray.h"

namespace loom {

/// The contents of a `.params` file: arrays in file order and, when the file was saved from a
/// dict, one name per array (`names[i]` belongs to `arrays[i]`). `names` is empty when the
/// file was saved from a list. Arrays may be none (`NDArray::is_none()`).
struct NamedArrays {
  std::vector<std::string> names;
  std::vector<NDArray> arrays;

  size_t size() const { return arrays.size(); }
  bool has_names() const { return !names.empty(); }
  /// Appends a named array (keep either all arrays named or none).
  void add(std::string name, NDArray array);
  /// The array called `name`, or nullptr.
  const NDArray* find(const std::string& name) const;
  /// Name -> array; throws FormatError for an unnamed list or a duplicate name.
  std::map<std::string, NDArray> to_map() const;
  /// Builds a named list from a map (sorted by name).
  static NamedArrays from_map(const std::map<std::string, NDArray>& m);
};

/// Which shape semantics a file's records are written in / must be read in. MXNet writes V3
/// records (0 is a real size, ndim 0 a scalar) when NumPy shape semantics (`np_shape`) are
/// on and V2 records otherwise, and refuses to load either in the other mode. kAuto is
/// Loom's own choice: write V2 unless an array is 0-dim, read both.
enum class ShapeSemantics { kAuto, kLegacy, kNumpy };

/// Loads a `.params` file to host memory. Accepts V2/V3 dense records, V1 and V0 legacy
/// records, none arrays and any saved device context. Throws FormatError naming the file, the
/// byte offset and what was expected on truncation or corruption, and for sparse storage.
/// With kLegacy, a V3 record is refused; with kNumpy, any other record is (MXNet's rule).
NamedArrays load_params(const std::string& path, ShapeSemantics mode = ShapeSemantics::kAuto);
/// Same as load_params, parsing `bytes`; `what` names the source in error messages.
NamedArrays load_params_from_bytes(const std::string& bytes, const std::string& what,
                                   ShapeSemantics mode = ShapeSemantics::kAuto);

/// Serialises as MXNet 1.x writes it: dense V2 records with context (cpu, 0) and none arrays
/// as ndim 0. A file holding a 0-dim (scalar) array is written with V3 (NumPy-shape) records
/// throughout, since V2 cannot express a scalar (kAuto). kNumpy writes V3 records always;
/// kLegacy writes V2 and refuses a 0-dim array. Arrays on any device are copied to host.
std::string save_params_to_bytes(const NamedArrays& params,
                                 ShapeSemantics mode = ShapeSemantics::kAuto);
/// Writes save_params_to_bytes(params, mode) to `path` atomically (temp file in the same
/// directory, fsync, rename), so readers never see a half-written file.
void save_params(const std::string& path, const NamedArrays& params,
                 ShapeSemantics mode = ShapeSemantics::kAuto);

/// Argument and auxiliary-state arrays of a Module/`save_checkpoint` style file.
struct CheckpointParams {
  std::map<std::string, NDArray> arg;
  std::map<std::string, NDArray> aux;
};
/// Splits `arg:<name>` / `aux:<name>` keys at the first ':'. Throws FormatError (naming
/// `what`) for unnamed files, keys without a known prefix, and duplicates.
CheckpointParams split_checkpoint(const NamedArrays& params, const std::string& what = "params");
/// The inverse: `arg:`/`aux:`-prefixed names, args first, each group sorted by name.
NamedArrays join_checkpoint(const CheckpointParams& ckpt);

/// Reads a whole file; throws Error naming the path when it cannot be read.
std::string read_file_bytes(const std::string& path);
/// Writes `bytes` to `path` via a temp file in the same directory, fsync and rename; the temp
/// file is removed on failure. Throws Error naming the path.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace loom
