"""mx.runtime: the features this Loom build has (MXNet's Features / feature_list).

Answers come from the running library, not from a table: the shared libraries the compiled
module loaded (oneDNN, CUDA runtime, cuDNN, NCCL, OpenMP, BLAS), whether a GPU is usable,
and the CPU's instruction sets (Loom is built for the host CPU, LOOM_NATIVE). Features Loom
does not have (sparse storage, distributed kvstore, TensorRT, TVM, OpenCV, ...) are reported
disabled."""
import collections
import os
import platform

from . import _loom  # noqa: F401 - the compiled library must be loaded to be seen

# MXNet 1.x feature names, in its order.
_NAMES = ["CUDA", "CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3",
          "CPU_SSE4_1", "CPU_SSE4_2", "CPU_SSE4A", "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE",
          "F16C", "JEMALLOC", "BLAS_OPEN", "BLAS_ATLAS", "BLAS_MKL", "BLAS_APPLE", "LAPACK",
          "MKLDNN", "OPENCV", "CAFFE", "PROFILER", "DIST_KVSTORE", "CXX14", "INT64_TENSOR_SIZE",
          "SIGNAL_HANDLER", "DEBUG", "TVM_OP"]


class Feature:
    """One compile-time feature: .name and .enabled."""

    __slots__ = ("_name", "_enabled")

    def __init__(self, name, enabled):
        self._name = name
        self._enabled = bool(enabled)

    @property
    def name(self):
        return self._name

    @property
    def enabled(self):
        return self._enabled

    def __repr__(self):
        return ("\u2714 " if self._enabled else "\u2716 ") + self._name


def _loaded_libraries():
    """Base names of the shared objects mapped into this process."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and ".so" in parts[-1]:
                    libs.add(os.path.basename(parts[-1]))
    except OSError:
        pass
    return libs


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _detect():
    libs = _loaded_libraries()

    def has(*prefixes):
        return any(lib.startswith(p) for lib in libs for p in prefixes)

    x86 = platform.machine() in ("x86_64", "AMD64", "i686")
    flags = _cpu_flags() if x86 else set()
    on = {
        "CUDA": has("libcudart"),
        "CUDNN": has("libcudnn"),
        "NCCL": has("libnccl"),
        "CUDA_RTC": has("libnvrtc"),
        "CPU_SSE": "sse" in flags, "CPU_SSE2": "sse2" in flags, "CPU_SSE3": "pni" in flags,
        "CPU_SSE4_1": "sse4_1" in flags, "CPU_SSE4_2": "sse4_2" in flags,
        "CPU_SSE4A": "sse4a" in flags, "CPU_AVX": "avx" in flags, "CPU_AVX2": "avx2" in flags,
        "SSE": "sse2" in flags, "F16C": "f16c" in flags,
        "OPENMP": has("libgomp", "libomp", "libiomp"),
        "JEMALLOC": has("libjemalloc"),
        "BLAS_OPEN": has("libopenblas"),
        "BLAS_ATLAS": has("libatlas"),
        "BLAS_MKL": has("libmkl"),
        "LAPACK": has("liblapack", "libopenblas", "libmkl"),
        "MKLDNN": has("libdnnl", "libmkldnn"),
        "PROFILER": True,  # mx.profiler writes Chrome traces
        "CXX14": True,  # Loom is C++20
        "INT64_TENSOR_SIZE": True,
    }
    return [Feature(n, on.get(n, False)) for n in _NAMES]


def feature_list():
    """[Feature] for every feature name MXNet 1.x reports."""
    return list(Features().values())


class Features(collections.OrderedDict):
    """name -> Feature (a singleton)."""

    instance = None

    def __new__(cls):
        if cls.instance is None:
            inst = super().__new__(cls)
            collections.OrderedDict.__init__(inst, [(f.name, f) for f in _detect()])
            cls.instance = inst
        return cls.instance

    def __init__(self):
        pass

    def __repr__(self):
        return str(list(self.values()))

    def is_enabled(self, feature_name):
        """True/False for a known feature name (case-insensitive); RuntimeError otherwise."""
        key = feature_name.upper()
        if key not in self:
            raise RuntimeError("Feature '%s' is unknown, known features are: %s" %
                               (feature_name, list(self.keys())))
        return self[key].enabled
