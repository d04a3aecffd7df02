"""Data iterators (``mx.io``), following MXNet 1.x semantics: DataDesc, DataBatch, DataIter,
NDArrayIter (in-memory arrays in batches, with pad / discard / roll_over handling of the
last incomplete batch), ResizeIter, PrefetchingIter (background threads), and the file
iterators CSVIter, MNISTIter and ImageRecordIter (RecordIO images decoded with OpenCV in a
thread pool, batches assembled ahead in a bounded queue; its code is in image_record_iter.py)."""
import gzip
import os
import queue
import struct
import threading
import warnings
from collections import OrderedDict, namedtuple

import numpy as np

from .base import MXNetError

__all__ = ["DataDesc", "DataBatch", "DataIter", "NDArrayIter", "ResizeIter", "PrefetchingIter",
           "CSVIter", "MNISTIter", "ImageRecordIter", "ImageRecordUInt8Iter",
           "ImageRecordInt8Iter"]


def _nd():
    """The core package's NDArray module (``mx.nd``)."""
    import importlib
    pkg = importlib.import_module(__package__)
    nd = getattr(pkg, "nd", None)
    return nd if nd is not None else importlib.import_module(__package__ + ".ndarray")


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name, shape, dtype and layout of one input (``provide_data`` entries). Behaves as
    the tuple ``(name, shape)``."""

    def __new__(cls, name, shape, dtype=np.float32, layout="NCHW"):
        ret = super(DataDesc, cls).__new__(cls, name, tuple(shape))
        ret.dtype = dtype
        ret.layout = layout
        return ret

    def __repr__(self):
        return "DataDesc[%s,%s,%s,%s]" % (self.name, self.shape, self.dtype, self.layout)

    @staticmethod
    def get_batch_axis(layout):
        """Position of 'N' in the layout (0 when layout is None)."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes, types):
        """DataDescs from lists of (name, shape) and optionally (name, dtype)."""
        if types is not None:
            type_dict = dict(types)
            return [DataDesc(x[0], x[1], type_dict[x[0]]) for x in shapes]
        return [DataDesc(x[0], x[1]) for x in shapes]


class DataBatch(object):
    """One batch: ``data`` and ``label`` lists of NDArrays, ``pad`` (number of filler
    samples at the end), ``index``, ``bucket_key``, ``provide_data``/``provide_label``."""

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None,
                 provide_data=None, provide_label=None):
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError("Data must be list of NDArrays")
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError("Label must be list of NDArrays")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self):
        data_shapes = [tuple(d.shape) for d in self.data]
        label_shapes = [tuple(l.shape) for l in self.label] if self.label else None
        return "{}: data shapes: {} label shapes: {}".format(
            self.__class__.__name__, data_shapes, label_shapes)


class DataIter(object):
    """Base iterator: ``next()`` returns a DataBatch built from getdata/getlabel/getpad/
    getindex while ``iter_next()`` is true, then raises StopIteration; ``reset()`` starts
    a new epoch."""

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        pass

    def next(self):
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        pass

    def getdata(self):
        pass

    def getlabel(self):
        pass

    def getindex(self):
        return None

    def getpad(self):
        pass


def _to_numpy(v):
    """NDArrays keep their dtype; anything else becomes float32, as mx.nd.array makes it
    in MXNet's NDArrayIter."""
    if hasattr(v, "asnumpy"):
        return v.asnumpy()
    return np.asarray(v, dtype=np.float32)


def _init_data(data, allow_empty, default_name):
    """Normalises the inputs to a sorted list of (name, numpy array)."""
    if data is None:
        data = []
    if isinstance(data, np.ndarray) or hasattr(data, "asnumpy"):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not allow_empty and len(data) == 0:
            raise ValueError("NDArrayIter needs at least one data array")
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict([("_%d_%s" % (i, default_name), d) for i, d in enumerate(data)])
    if not isinstance(data, dict):
        raise TypeError("Input must be NDArray, numpy.ndarray, a list of them or dict with "
                        "them as values")
    out = []
    for k, v in data.items():
        try:
            arr = _to_numpy(v)
        except Exception as err:
            raise TypeError("Invalid type '%s' for %s, should be NDArray or numpy.ndarray"
                            % (type(v), k)) from err
        out.append((k, arr))
    return list(sorted(out, key=lambda kv: kv[0]))


class NDArrayIter(DataIter):
    """Iterates over in-memory arrays in batches.

    ``data`` / ``label``: an array, a list of arrays (named ``_0_data``, ``_1_data``, ...)
    or a dict name -> array (sorted by name). ``last_batch_handle`` decides what happens to
    the final incomplete batch:

    * ``'pad'`` (default): filled up with samples from the start; ``batch.pad`` says how many;
    * ``'discard'``: dropped;
    * ``'roll_over'``: kept back and completed with the first samples of the next epoch
      (``batch.pad`` of that first batch is the number of samples rolled over).
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False,
                 last_batch_handle="pad", data_name="data", label_name="softmax_label"):
        super(NDArrayIter, self).__init__(batch_size)
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError("last_batch_handle must be 'pad', 'discard' or 'roll_over', "
                             "got '%s'" % last_batch_handle)
        if int(batch_size) <= 0:
            raise ValueError("batch_size must be positive")
        self.data = _init_data(data, allow_empty=False, default_name=data_name)
        self.label = _init_data(label, allow_empty=True, default_name=label_name)
        self.num_data = self.data[0][1].shape[0]
        for k, v in self.data + self.label:
            if v.shape[0] != self.num_data:
                raise ValueError("all data and labels need the same number of samples: "
                                 "'%s' has %d, '%s' has %d"
                                 % (self.data[0][0], self.num_data, k, v.shape[0]))
        self.idx = np.arange(self.num_data)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = int(batch_size)
        self.cursor = -self.batch_size
        self._cache = None  # (data, label, idx) of a rolled-over incomplete batch
        self.reset()

    @property
    def provide_data(self):
        return [DataDesc(k, tuple([self.batch_size] + list(v.shape[1:])), v.dtype.type)
                for k, v in self.data]

    @property
    def provide_label(self):
        return [DataDesc(k, tuple([self.batch_size] + list(v.shape[1:])), v.dtype.type)
                for k, v in self.label]

    def hard_reset(self):
        """Starts over, dropping any rolled-over samples."""
        if self.shuffle:
            np.random.shuffle(self.idx)
        self.cursor = -self.batch_size
        self._cache = None

    def reset(self):
        """Starts a new epoch. With 'roll_over', samples left over from an epoch that ran
        to its end begin the next one."""
        if self.shuffle:
            np.random.shuffle(self.idx)
        if (self.last_batch_handle == "roll_over" and self._cache is not None
                and self.num_data - self.batch_size < self.cursor < self.num_data):
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size
            self._cache = None

    def iter_next(self):
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self):
        if not self.iter_next():
            raise StopIteration
        idx = self._batch_indices()
        if len(idx) != self.batch_size:
            # incomplete last batch: 'discard' drops it, 'roll_over' keeps it for later
            if self.last_batch_handle == "roll_over":
                self._cache = idx
            raise StopIteration
        return DataBatch(data=self._take(self.data, idx), label=self._take(self.label, idx),
                         pad=self.getpad(), index=self._index(idx))

    def _batch_indices(self):
        """Sample indices (into the arrays) of the batch at the cursor."""
        if self.cursor >= self.num_data:
            raise RuntimeError("DataIter needs reset.")
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            rest = self.idx[:self.cursor + self.batch_size]
            cache = self._cache if self._cache is not None else np.zeros(0, dtype=np.int64)
            return np.concatenate([cache, rest]).astype(np.int64)
        end = self.cursor + self.batch_size
        if self.last_batch_handle == "pad" and end > self.num_data:
            pad = end - self.num_data
            wrap = np.resize(self.idx, pad)  # repeats from the start (also if pad > n)
            return np.concatenate([self.idx[self.cursor:], wrap]).astype(np.int64)
        return self.idx[self.cursor:min(end, self.num_data)].astype(np.int64)

    def _take(self, source, idx):
        nd = _nd()
        return [nd.array(np.ascontiguousarray(v[idx]), dtype=v.dtype) for _, v in source]

    def _index(self, idx):
        return np.asarray(idx)

    def getdata(self):
        return self._take(self.data, self._batch_indices())

    def getlabel(self):
        return self._take(self.label, self._batch_indices())

    def getindex(self):
        return self._index(self._batch_indices())

    def getpad(self):
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0


class ResizeIter(DataIter):
    """Makes ``data_iter`` yield exactly ``size`` batches per epoch (restarting it as
    needed); ``reset_internal`` resets the wrapped iterator on every reset."""

    def __init__(self, data_iter, size, reset_internal=True):
        super(ResizeIter, self).__init__()
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self):
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad


class PrefetchingIter(DataIter):
    """Runs one or more iterators in background threads, one batch ahead.

    ``iters``: a DataIter or a list of them (their batches are joined: data and label
    lists concatenated; they must agree on ``pad``). ``rename_data`` / ``rename_label``:
    one dict per iterator mapping its provide_data / provide_label names to new names."""

    def __init__(self, iters, rename_data=None, rename_label=None):
        super(PrefetchingIter, self).__init__()
        if not isinstance(iters, list):
            iters = [iters]
        if not iters:
            raise ValueError("PrefetchingIter needs at least one iterator")
        self.iters = iters
        self.n_iter = len(iters)
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch = None
        self._requests = [queue.Queue() for _ in iters]
        self._results = [queue.Queue(maxsize=1) for _ in iters]
        self._threads = []
        for i in range(self.n_iter):
            # the thread holds the wrapped iterator and its queues, not self, so an
            # abandoned PrefetchingIter is collected and its __del__ stops the threads
            t = threading.Thread(target=PrefetchingIter._worker,
                                 args=(self.iters[i], self._requests[i], self._results[i]),
                                 daemon=True, name="loom-prefetch-%d" % i)
            t.start()
            self._threads.append(t)
        self._request_all("next")

    @staticmethod
    def _worker(it, req, res):
        while True:
            cmd = req.get()
            if cmd is None:
                return
            try:
                if cmd == "reset":
                    it.reset()
                    out = True
                else:
                    out = it.next()
            except StopIteration:
                out = None
            except BaseException as e:  # handed to the consumer
                out = e
            res.put(out)

    def _request_all(self, cmd):
        for r in self._requests:
            r.put(cmd)
        self._pending = True

    def _collect(self):
        out = [r.get() for r in self._results]
        self._pending = False
        for o in out:
            if isinstance(o, BaseException):
                raise o
        return out

    def close(self):
        """Stops the background threads."""
        threads = getattr(self, "_threads", [])
        if getattr(self, "_pending", False):
            try:
                self._collect()
            except BaseException:
                pass
        for r in getattr(self, "_requests", []):
            r.put(None)
        for t in threads:
            t.join()
        self._threads = []

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _renamed(self, attr, renames):
        out = []
        for k, it in enumerate(self.iters):
            descs = getattr(it, attr)
            if renames is None:
                out.extend(descs)
                continue
            for x in descs:
                if isinstance(x, DataDesc):
                    out.append(DataDesc(renames[k].get(x.name, x.name), x.shape, x.dtype,
                                        x.layout))
                else:
                    out.append(DataDesc(renames[k].get(x[0], x[0]), x[1]))
        return out

    @property
    def provide_data(self):
        return self._renamed("provide_data", self.rename_data)

    @property
    def provide_label(self):
        return self._renamed("provide_label", self.rename_label)

    def reset(self):
        if self._pending:
            try:
                self._collect()
            except BaseException:
                pass
        self._request_all("reset")
        self._collect()
        self._request_all("next")

    def iter_next(self):
        if not self._pending:
            return False
        batches = self._collect()
        if batches[0] is None:
            if any(b is not None for b in batches):
                raise MXNetError("PrefetchingIter: the iterators ran out after different "
                                 "numbers of batches")
            return False
        for b in batches:
            if b is None or b.pad != batches[0].pad:
                raise MXNetError("PrefetchingIter: the iterators disagree on the number of "
                                 "samples (pad %s vs %s)" % (batches[0].pad,
                                                             None if b is None else b.pad))
        self.current_batch = DataBatch(sum([list(b.data) for b in batches], []),
                                       sum([list(b.label or []) for b in batches], []),
                                       batches[0].pad, batches[0].index,
                                       provide_data=self.provide_data,
                                       provide_label=self.provide_label)
        self._request_all("next")
        return True

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad


# ---------------------------------------------------------------------------------------
# File iterators. They behave like MXNet's C++ iterators (MXDataIter): the first batch is
# made when the iterator is built (so bad files fail there), getdata()/getlabel() return a
# single NDArray, and with round_batch the last batch of an epoch is completed with samples
# from the start while the next epoch continues after them.


class _BatchPlan(object):
    """Sample order per epoch with MXNet's round_batch semantics."""

    def __init__(self, num, batch_size, round_batch, shuffle=False, seed=0, drop_last=False):
        self.num = num
        self.batch_size = batch_size
        self.round_batch = round_batch
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.rng = np.random.RandomState(seed)
        self.start = 0

    def epoch(self):
        """[(sample ids, pad)] for the next epoch."""
        order = np.arange(self.num)
        if self.shuffle:
            self.rng.shuffle(order)
            self.start = 0
        bs, out, pos = self.batch_size, [], self.start
        self.start = 0
        while pos < self.num:
            ids = order[pos:pos + bs]
            pos += bs
            if len(ids) < bs:
                if self.drop_last:
                    break
                pad = bs - len(ids)
                if self.round_batch:
                    ids = np.concatenate([ids, np.resize(order, pad)])
                    self.start = pad % self.num
                else:
                    ids = np.concatenate([ids, np.full(pad, -1)])
                out.append((ids, pad))
                break
            out.append((ids, 0))
        return out


class _FileIter(DataIter):
    """Shared machinery of CSVIter / MNISTIter / ImageRecordIter: batches come from
    ``_produce(epoch_plan)``, a generator of (data, label, pad, index) numpy tuples."""

    def __init__(self, batch_size, data_name, label_name):
        super(_FileIter, self).__init__(batch_size)
        self.data_name = data_name
        self.label_name = label_name
        self._gen = None
        self._current = None
        self.first_batch = None

    def _start(self):
        self._gen = self._produce(self._plan.epoch())
        # as MXNet: the first batch is made up front, so bad inputs fail at construction
        self.first_batch = self.next()
        self.provide_data = [DataDesc(self.data_name, self._current[0].shape,
                                      self._current[0].dtype.type)]
        self.provide_label = [DataDesc(self.label_name, self._current[1].shape,
                                       self._current[1].dtype.type)]

    def reset(self):
        self._stop()
        self.first_batch = None
        self._gen = self._produce(self._plan.epoch())

    def _stop(self):
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def iter_next(self):
        if self.first_batch is not None:
            self.first_batch = None
            return True
        if self._gen is None:
            return False
        try:
            self._current = next(self._gen)
        except StopIteration:
            self._gen = None
            return False
        return True

    def next(self):
        if self.first_batch is not None:
            b, self.first_batch = self.first_batch, None
            return b
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self.getpad(),
                         index=self.getindex())

    def _nd(self, a):
        return _nd().array(a, dtype=a.dtype)

    def getdata(self):
        return self._nd(self._current[0])

    def getlabel(self):
        return self._nd(self._current[1])

    def getpad(self):
        return self._current[2]

    def getindex(self):
        return self._current[3]


def _shape_tuple(shape, what):
    try:
        shape = tuple(int(x) for x in (shape if isinstance(shape, (list, tuple)) else (shape,)))
    except (TypeError, ValueError):
        raise ValueError("%s must be a shape tuple, got %r" % (what, shape)) from None
    if not shape or any(x <= 0 for x in shape):
        raise ValueError("%s must be a non-empty shape of positive sizes, got %r"
                         % (what, shape))
    return shape


def _read_csv(path, width, dtype, what):
    """Rows of a CSV file as a 2-D array; every row must have ``width`` values."""
    if os.path.isfile(path):
        try:  # fast path; the line-by-line reader below names the bad line
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                arr = np.loadtxt(path, delimiter=",", dtype=dtype, ndmin=2)
            if arr.size == 0:
                return arr.reshape(0, width)
            if arr.shape[1] == width:
                return arr
        except ValueError:
            pass
    rows = []
    try:
        f = open(path, "r")
    except OSError as e:
        raise MXNetError("CSVIter: cannot open %s '%s': %s" % (what, path, e.strerror or e))
    with f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            fields = line.split(",")
            if len(fields) != width:
                raise MXNetError("CSVIter: %s:%d has %d values but the %s shape needs %d"
                                 % (path, lineno, len(fields), what, width))
            try:
                if np.dtype(dtype).kind in "iu":
                    rows.append([int(float(x)) if ("." in x or "e" in x.lower()) else int(x)
                                 for x in fields])
                else:
                    rows.append([float(x) for x in fields])
            except ValueError:
                raise MXNetError("CSVIter: %s:%d: cannot parse %r as %s"
                                 % (path, lineno, line[:80], np.dtype(dtype).name)) from None
    return np.asarray(rows, dtype=dtype).reshape(len(rows), width)


class CSVIter(_FileIter):
    """Batches from CSV files: each row of ``data_csv`` is one sample reshaped to
    ``data_shape``; ``label_csv`` (optional, zeros without it) likewise with
    ``label_shape``. ``round_batch`` (default True) completes the last batch with samples
    from the start (and the next epoch starts after them); otherwise the last batch's
    ``pad`` slots keep the previous batch's values. ``dtype``: float32, int32 or int64."""

    def __init__(self, data_csv, data_shape, label_csv=None, label_shape=(1,), batch_size=1,
                 round_batch=True, dtype="float32", data_name="data",
                 label_name="softmax_label", prefetch_buffer=4, ctx="cpu", **kwargs):
        super(CSVIter, self).__init__(int(batch_size), data_name, label_name)
        if self.batch_size <= 0:
            raise ValueError("batch_size must be positive")
        if np.dtype(dtype).name not in ("float32", "int32", "int64"):
            raise ValueError("CSVIter dtype must be float32, int32 or int64, got %s" % dtype)
        dshape = _shape_tuple(data_shape, "data_shape")
        lshape = _shape_tuple(label_shape, "label_shape")
        data = _read_csv(data_csv, int(np.prod(dshape)), dtype, "data")
        if label_csv:
            label = _read_csv(label_csv, int(np.prod(lshape)), dtype, "label")
            if len(label) != len(data):
                raise MXNetError("CSVIter: '%s' has %d rows but '%s' has %d"
                                 % (data_csv, len(data), label_csv, len(label)))
        else:
            label = np.zeros((len(data), int(np.prod(lshape))), dtype=dtype)
        if len(data) == 0:
            raise MXNetError("CSVIter: '%s' has no rows" % data_csv)
        if round_batch and len(data) < self.batch_size:
            raise MXNetError("CSVIter: '%s' has %d rows, fewer than batch_size %d"
                             % (data_csv, len(data), self.batch_size))
        self._data = data.reshape((len(data),) + dshape)
        lshape_out = () if lshape == (1,) else lshape
        self._label = label.reshape((len(label),) + lshape_out)
        self._plan = _BatchPlan(len(data), self.batch_size, bool(round_batch))
        self._buf = None
        self._start()

    def _produce(self, plan):
        bs = self.batch_size
        if self._buf is None:
            self._buf = (np.zeros((bs,) + self._data.shape[1:], self._data.dtype),
                         np.zeros((bs,) + self._label.shape[1:], self._label.dtype),
                         np.zeros(bs, np.int64))
        for ids, pad in plan:
            d, l, ix = self._buf
            real = ids[ids >= 0]
            d[:len(real)] = self._data[real]
            l[:len(real)] = self._label[real]
            ix[:len(real)] = real
            yield d.copy(), l.copy(), pad, ix.copy()


def _open_maybe_gz(path):
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        return gzip.open(path, "rb") if head == b"\x1f\x8b" else open(path, "rb")
    except OSError as e:
        raise MXNetError("MNISTIter: cannot open '%s': %s" % (path, e.strerror or e))


def _read_idx_file(path, magic, ndim):
    with _open_maybe_gz(path) as f:
        raw = f.read()
    hlen = 4 * (1 + ndim)
    if len(raw) < hlen:
        raise MXNetError("MNISTIter: '%s' is too short for an MNIST idx header" % path)
    fields = struct.unpack(">%dI" % (1 + ndim), raw[:hlen])
    if fields[0] != magic:
        raise MXNetError("MNISTIter: '%s' has magic %d, expected %d (not an MNIST %s file)"
                         % (path, fields[0], magic, "image" if ndim == 3 else "label"))
    dims = fields[1:]
    need = int(np.prod(dims))
    if len(raw) - hlen < need:
        raise MXNetError("MNISTIter: '%s' is truncated: header says %s (%d bytes), file has "
                         "%d bytes of data" % (path, dims, need, len(raw) - hlen))
    return np.frombuffer(raw, np.uint8, need, hlen).reshape(dims)


class MNISTIter(_FileIter):
    """MNIST in its idx format (plain or gzip): ``image`` (idx3) and ``label`` (idx1) files.
    Pixels are scaled by 1/256 as MXNet does; data is (batch, 1, 28, 28), or (batch, 784)
    with ``flat``. Only full batches are produced. ``shuffle`` (default True) shuffles once
    with ``seed`` (the order differs from MXNet's, which uses the C++ engine).
    ``num_parts`` / ``part_index`` read one contiguous part of the file."""

    def __init__(self, image="./train-images-idx3-ubyte", label="./train-labels-idx1-ubyte",
                 batch_size=128, shuffle=True, flat=False, seed=0, silent=False, num_parts=1,
                 part_index=0, data_name="data", label_name="softmax_label", input_shape=None,
                 prefetch_buffer=4, ctx="cpu", dtype=None, **kwargs):
        super(MNISTIter, self).__init__(int(batch_size), data_name, label_name)
        if not 0 <= int(part_index) < int(num_parts):
            raise ValueError("MNISTIter: need 0 <= part_index < num_parts, got %s / %s"
                             % (part_index, num_parts))
        imgs = _read_idx_file(image, 2051, 3)
        labs = _read_idx_file(label, 2049, 1)

        def part(n):
            return (int(float(n) / num_parts * part_index),
                    int(float(n) / num_parts * (part_index + 1)))
        s, e = part(imgs.shape[0])
        imgs = imgs[s:e].astype(np.float32) * np.float32(1.0 / 256.0)
        s, e = part(labs.shape[0])
        labs = labs[s:e].astype(np.float32)
        if len(labs) < len(imgs):
            raise MXNetError("MNISTIter: '%s' has %d labels for %d images in '%s'"
                             % (label, len(labs), len(imgs), image))
        if shuffle:
            order = np.random.RandomState(seed).permutation(len(imgs))
            imgs, labs = imgs[order], labs[order[order < len(labs)]]
        self._data = imgs.reshape(len(imgs), -1) if flat else imgs[:, None]
        self._label = labs
        if not silent:
            import logging
            logging.info("MNISTIter: load %d images, shuffle=%d, shape=%s", len(imgs),
                         int(bool(shuffle)), (self.batch_size,) + self._data.shape[1:])
        if len(imgs) < self.batch_size:
            raise MXNetError("MNISTIter: %d images are fewer than batch_size %d"
                             % (len(imgs), self.batch_size))
        self._plan = _BatchPlan(len(imgs), self.batch_size, False, drop_last=True)
        self._start()

    def _produce(self, plan):
        for ids, pad in plan:
            yield self._data[ids], self._label[ids], pad, np.zeros(len(ids), np.uint64)


# ImageRecordIter and its dtype variants live in their own module (it is most of the file
# iterators' code); imported last, since it builds on _FileIter above.
from .image_record_iter import (ImageRecordIter, ImageRecordUInt8Iter,  # noqa: E402,F401
                                ImageRecordInt8Iter)
