// NDArray: shape/dtype/context, NumPy interop (zero-copy views of CPU arrays), DLPack
// capsules, copies, views along axis 0. Arithmetic and indexing sugar live in loom/ndarray.py.
#include "common.h"
#include "runtime/device.h"

namespace loom::pyb {
namespace {

// A NumPy array viewing `a`'s memory; the capsule keeps the storage alive.
py::array numpy_view(const NDArray& a, bool writeable) {
  if (a.is_none()) return py::array(dtype_to_numpy(DType::kFloat32), std::vector<py::ssize_t>{0});
  if (a.device().type != DeviceType::kCPU)
    throw Error("numpy view of a " + a.device().str() + " array");
  auto* keep = new NDArray(a);
  py::capsule owner(keep, [](void* p) { delete static_cast<NDArray*>(p); });
  std::vector<py::ssize_t> shape(a.shape().begin(), a.shape().end());
  py::array arr(dtype_to_numpy(a.dtype()), shape, a.raw(), owner);
  if (!writeable) arr.attr("setflags")(py::arg("write") = false);
  return arr;
}

py::array numpy_copy(const NDArray& a) {
  std::vector<py::ssize_t> shape(a.shape().begin(), a.shape().end());
  py::array arr(dtype_to_numpy(a.dtype()), shape);
  if (!a.is_none() && a.size()) a.copy_to_host(arr.mutable_data(), a.nbytes());
  return arr;
}

void set_from_numpy(const NDArray& dst, py::handle src) {
  py::object np = py::module_::import("numpy");
  py::object arr = np.attr("asarray")(src, dtype_to_numpy(dst.dtype()));
  std::vector<py::ssize_t> shape(dst.shape().begin(), dst.shape().end());
  py::tuple st = py::cast(shape);
  py::array c;
  try {
    c = np.attr("ascontiguousarray")(np.attr("broadcast_to")(arr, st));
  } catch (py::error_already_set&) {
    throw ShapeError("cannot assign an array of shape " + std::string(py::str(arr.attr("shape"))) +
                     " to an NDArray of shape " + dst.shape().str());
  }
  dst.copy_from_host(c.data(), dst.nbytes());
}

// An NDArray on memory at `data` that another library owns; `owner` keeps it alive.
NDArray adopt(void* data, Device dev, Shape shape, DType dtype, std::shared_ptr<void> owner) {
  const auto bytes = static_cast<size_t>(shape.bytes(dtype));
  auto storage = std::make_shared<Storage>(dev, data, bytes, std::move(owner));
  return NDArray(std::move(storage), 0, std::move(shape), dtype);
}

// The NumPy array's own memory as an NDArray (mx.nd.from_numpy(zero_copy=True)); the array
// is kept alive by the NDArray.
NDArray adopt_numpy(py::array arr) {
  if (!(arr.flags() & py::array::c_style))
    throw py::value_error("from_numpy: only a C-contiguous array can be shared without a copy");
  DType t = dtype_from_py(arr.dtype());
  Shape shape(std::vector<int64_t>(arr.shape(), arr.shape() + arr.ndim()));
  void* data = const_cast<void*>(arr.data());
  auto owner = std::make_shared<PyRef>(py::reinterpret_borrow<py::object>(arr));
  return adopt(data, Device::cpu(), std::move(shape), t, owner);
}

// DLPack: the unversioned ABI that MXNet 1.x and NumPy's __dlpack__ exchange in a capsule
// named "dltensor" (renamed "used_dltensor" once consumed), declared from the public spec.
struct DLDevice {
  int32_t device_type;  // kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBool = 6
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null = compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3;
constexpr const char* kCapsule = "dltensor";
constexpr const char* kUsedCapsule = "used_dltensor";

struct DLCode {
  DType dtype;
  DLDataType dl;
};
constexpr DLCode kDLCodes[] = {
    {DType::kFloat32, {2, 32, 1}}, {DType::kFloat64, {2, 64, 1}}, {DType::kFloat16, {2, 16, 1}},
    {DType::kUint8, {1, 8, 1}},    {DType::kInt32, {0, 32, 1}},   {DType::kInt8, {0, 8, 1}},
    {DType::kInt64, {0, 64, 1}},   {DType::kBool, {6, 8, 1}},
};

DLDataType dl_dtype(DType t) {
  for (const auto& c : kDLCodes)
    if (c.dtype == t) return c.dl;
  throw Error(std::string("DLPack: no DLPack type for dtype ") + dtype_name(t));
}

DType dtype_from_dl(DLDataType d) {
  for (const auto& c : kDLCodes)
    if (c.dl.code == d.code && c.dl.bits == d.bits && c.dl.lanes == d.lanes) return c.dtype;
  throw Error("from_dlpack: unsupported DLPack type (code " + std::to_string(d.code) + ", bits " +
              std::to_string(d.bits) + ", lanes " + std::to_string(d.lanes) +
              "); Loom takes float16/32/64, int8/32/64, uint8 and bool");
}

// What a Loom capsule owns: the array (keeping its storage alive) and the shape DLTensor
// points to.
struct DLExport {
  NDArray array;
  std::vector<int64_t> shape;
  DLManagedTensor managed{};
};

void dl_export_deleter(DLManagedTensor* t) { delete static_cast<DLExport*>(t->manager_ctx); }

// Frees an unconsumed capsule's tensor; a consumed one ("used_dltensor") is the consumer's.
void dl_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsule)) return;
  auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsule));
  if (t && t->deleter) t->deleter(t);
}

// A DLPack capsule viewing `a`'s memory (mx.nd.to_dlpack_for_read / _for_write). Loom runs
// synchronously, so there are no pending reads or writes to wait for.
py::capsule to_dlpack(const NDArray& a) {
  if (a.is_none()) throw Error("to_dlpack: the array has no storage (a none array)");
  auto* e = new DLExport{a, std::vector<int64_t>(a.shape().begin(), a.shape().end())};
  DLTensor& t = e->managed.dl_tensor;
  t.data = a.raw();  // a mutable pointer: the consumer may write
  t.device = {a.device().type == DeviceType::kCPU ? kDLCPU : kDLCUDA, a.device().id};
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = dl_dtype(a.dtype());
  t.shape = e->shape.data();
  e->managed.manager_ctx = e;
  e->managed.deleter = dl_export_deleter;
  PyObject* cap = PyCapsule_New(&e->managed, kCapsule, dl_capsule_destructor);
  if (!cap) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

bool dl_compact(const DLTensor& t) {
  if (!t.strides) return true;
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

// Takes over the tensor of a "dltensor" capsule (renaming it "used_dltensor"). A Loom
// capsule gives back its array; another producer's compact tensor is adopted without a copy
// (its deleter runs when the last NDArray on it goes); a strided CPU one is copied.
NDArray from_dlpack(py::object obj) {
  if (!PyCapsule_CheckExact(obj.ptr())) {
    if (!py::hasattr(obj, "__dlpack__"))
      throw py::type_error(
          "from_dlpack: expected a DLPack capsule or an object with __dlpack__, got " +
          std::string(py::str(py::type::of(obj))));
    obj = obj.attr("__dlpack__")();
  }
  if (!PyCapsule_IsValid(obj.ptr(), kCapsule))
    throw py::value_error("from_dlpack: the capsule is not an unused DLPack tensor (named '" +
                          std::string(kCapsule) + "'); a capsule can be consumed only once");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(obj.ptr(), kCapsule));
  if (PyCapsule_SetName(obj.ptr(), kUsedCapsule) != 0) throw py::error_already_set();
  std::shared_ptr<DLManagedTensor> owner(m, [](DLManagedTensor* t) {
    if (t->deleter) t->deleter(t);
  });
  if (m->deleter == dl_export_deleter) return static_cast<DLExport*>(m->manager_ctx)->array;
  const DLTensor& t = m->dl_tensor;
  DType dtype = dtype_from_dl(t.dtype);
  Shape shape(std::vector<int64_t>(t.shape, t.shape + t.ndim));
  Device dev;
  if (t.device.device_type == kDLCPU || t.device.device_type == kDLCUDAHost)
    dev = Device::cpu();
  else if (t.device.device_type == kDLCUDA)
    dev = Device{DeviceType::kGPU, t.device.device_id};
  else
    throw Error("from_dlpack: DLPack device type " + std::to_string(t.device.device_type) +
                " is neither CPU nor CUDA");
  char* data = static_cast<char*>(t.data) + t.byte_offset;
  if (dl_compact(t)) return adopt(data, dev, std::move(shape), dtype, owner);
  if (dev.type != DeviceType::kCPU)
    throw Error("from_dlpack: a strided (non-compact) " + dev.str() + " tensor cannot be taken");
  std::vector<py::ssize_t> dims(t.shape, t.shape + t.ndim), strides;
  for (int i = 0; i < t.ndim; ++i)
    strides.push_back(static_cast<py::ssize_t>(t.strides[i] * dtype_size(dtype)));
  py::array view(dtype_to_numpy(dtype), dims, strides, data, py::none());
  return ndarray_from_py(view, dev, dtype);
}

}  // namespace

void init_ndarray(py::module_& m) {
  py::class_<NDArray>(m, "NDArray", "An n-dimensional array on a device (mx.nd.NDArray).")
      // NDArray(handle, writable=True): MXNet's construction from a raw handle; Loom's
      // handles are tokens of live arrays (loom/ndarray.py _from_handle). The result shares
      // the array's memory; `writable` is accepted and not enforced.
      .def(py::init([](const py::object& handle, bool) {
             return py::module_::import("loom.ndarray").attr("_from_handle")(handle).cast<NDArray>();
           }),
           py::arg("handle"), py::arg("writable") = true)
      .def_property_readonly("shape", [](const NDArray& a) { return shape_to_tuple(a.shape()); })
      .def_property_readonly("dtype",
                             [](const NDArray& a) { return dtype_to_numpy_type(a.dtype()); })
      .def_property_readonly("context", &NDArray::device)
      .def_property_readonly("ctx", &NDArray::device)
      .def_property_readonly("size", [](const NDArray& a) { return a.is_none() ? 0 : a.size(); })
      .def_property_readonly("ndim", [](const NDArray& a) { return a.shape().ndim(); })
      .def_property_readonly("_is_none", &NDArray::is_none)
      .def(
          "asnumpy",
          [](const NDArray& a, bool copy) {
            if (a.is_none())
              return py::array(dtype_to_numpy(DType::kFloat32), std::vector<py::ssize_t>{0});
            if (copy || a.device().type != DeviceType::kCPU) return numpy_copy(a);
            return numpy_view(a, true);
          },
          py::arg("copy") = true,
          "A NumPy array with the contents. copy=True (default, as MXNet) returns a copy; "
          "copy=False returns a zero-copy view of a CPU array sharing its memory (writes go "
          "through, and the view sees later changes).")
      .def(
          "_numpy_view", [](const NDArray& a, bool w) { return numpy_view(a, w); },
          py::arg("writeable") = true)
      .def("_slice", &NDArray::slice, "View of rows [begin, end) along axis 0.")
      .def("_reshape_view",
           [](const NDArray& a, py::handle s) { return a.reshape(shape_from_py(s)); })
      .def(
          "_copy",
          [](const NDArray& a, py::object ctx) {
            if (ctx.is_none()) return a.copy();
            const Device d = py::cast<Device>(ctx);
            check_device(d);  // "no CUDA device: gpu(0) is not available (...)"
            return a.copy(d);
          },
          py::arg("ctx") = py::none())
      .def("_copy_from",
           [](const NDArray& dst, const NDArray& src) {
             if (dst.shape().numel() != src.shape().numel())
               throw ShapeError("cannot copy an array of shape " + src.shape().str() +
                                " into shape " + dst.shape().str());
             NDArray s = src.reshape(dst.shape());
             if (s.dtype() != dst.dtype()) {
               set_from_numpy(dst, numpy_copy(s));
               return;
             }
             if (!dst.same_memory(s)) dst.copy_from(s);
           })
      .def("_fill",
           [](const NDArray& a, double v) {
             if (a.device().type == DeviceType::kCPU) {
               a.fill(v);
               return;
             }
             NDArray h = NDArray::full(a.shape(), v, a.dtype());
             a.copy_from(h);
           })
      .def("_set_numpy", &set_from_numpy)
      .def("_same_memory", &NDArray::same_memory)
      .def("_data_ptr",
           [](const NDArray& a) { return a.is_none() ? 0 : reinterpret_cast<uintptr_t>(a.raw()); })
      .def("to_dlpack_for_read", &to_dlpack,
           "A DLPack capsule viewing this array's memory (no copy), for reading.")
      .def("to_dlpack_for_write", &to_dlpack,
           "A DLPack capsule viewing this array's memory (no copy); writes through it change "
           "the array.")
      .def(
          "__dlpack__",
          [](const NDArray& a, py::object stream, py::kwargs kw) {
            bool copy = kw.contains("copy") && !kw["copy"].is_none() && py::cast<bool>(kw["copy"]);
            return to_dlpack(copy ? a.copy() : a);
          },
          py::arg("stream") = py::none(),
          "The DLPack protocol (numpy.from_dlpack(nd)): a capsule viewing this array's memory.")
      .def("__dlpack_device__", [](const NDArray& a) {
        return py::make_tuple(a.device().type == DeviceType::kCPU ? kDLCPU : kDLCUDA,
                              a.device().id);
      });

  m.def("_empty", [](py::handle shape, py::handle dtype, py::object ctx) {
    Device d = ctx.is_none() ? Device::cpu() : py::cast<Device>(ctx);
    check_device(d);
    return NDArray(shape_from_py(shape), dtype_from_py(dtype), d);
  });
  m.def("_full", [](py::handle shape, double v, py::handle dtype, py::object ctx) {
    Device d = ctx.is_none() ? Device::cpu() : py::cast<Device>(ctx);
    check_device(d);
    return NDArray::full(shape_from_py(shape), v, dtype_from_py(dtype), d);
  });
  m.def("_array", [](py::handle src, py::handle dtype, py::object ctx) {
    Device d = ctx.is_none() ? Device::cpu() : py::cast<Device>(ctx);
    check_device(d);
    return ndarray_from_py(src, d, dtype_from_py(dtype));
  });
  m.def("_none_array", [] { return NDArray(); });
  m.def("_from_dlpack", &from_dlpack, py::arg("dlpack"));
  m.def("_adopt_numpy", &adopt_numpy, py::arg("array"));
}

}  // namespace loom::pyb
