"""ImageIter (``mx.image.ImageIter``): batches of images from a RecordIO file or an image
list, decoded and run through a list of Augmenters. Exported by ``loom.image``, where
MXNet has it."""
import logging
import numbers
import os
import random

import numpy as np

from .base import MXNetError
from . import io as _io
from . import recordio
from .image import CreateAugmenter, _nd, _np, imdecode

__all__ = ["ImageIter"]


class ImageIter(_io.DataIter):
    """Batches of images from a RecordIO file (``path_imgrec``, with ``path_imgidx`` for
    shuffling / partitions) or an image list (``path_imglist`` file of
    ``index<TAB>label(s)<TAB>path`` lines, or ``imglist`` [[label(s), path], ...], paths
    under ``path_root``). Each image is decoded, run through ``aug_list`` (default:
    CreateAugmenter(data_shape, **kwargs)) and transposed to CHW. ``last_batch_handle``:
    'pad' (fill from the start), 'discard' or 'roll_over' (the rest starts the next
    epoch)."""

    def __init__(self, batch_size, data_shape, label_width=1, path_imgrec=None,
                 path_imglist=None, path_root=None, path_imgidx=None, shuffle=False,
                 part_index=0, num_parts=1, aug_list=None, imglist=None, data_name="data",
                 label_name="softmax_label", dtype="float32", last_batch_handle="pad",
                 **kwargs):
        super(ImageIter, self).__init__(batch_size)
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ValueError("ImageIter needs path_imgrec, path_imglist or imglist")
        if len(data_shape) != 3 or data_shape[0] not in (1, 3):
            raise ValueError("data_shape must be (1 or 3, height, width), got %s"
                             % (data_shape,))
        if dtype not in ("int32", "float32", "int64", "float64"):
            raise ValueError("dtype must be int32, float32, int64 or float64, got %s" % dtype)
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError("last_batch_handle must be pad, discard or roll_over")
        logging.info("Using %s threads for decoding...", os.environ.get("MXNET_CPU_WORKER_NTHREADS", 1))
        self.imgrec = None
        self.imgidx = None
        self.seq = None
        if path_imgrec:
            if path_imgidx:
                self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                self.imgidx = list(self.imgrec.keys)
            else:
                self.imgrec = recordio.MXRecordIO(path_imgrec, "r")
        self.imglist = None
        if path_imglist:
            imgkeys, result = [], {}
            with open(path_imglist) as fin:
                for lineno, line in enumerate(fin, 1):
                    parts = line.strip().split("\t")
                    if len(parts) < 3:
                        if line.strip():
                            raise MXNetError("%s:%d: want 'index<TAB>label(s)<TAB>path'"
                                             % (path_imglist, lineno))
                        continue
                    label = np.array(parts[1:-1], dtype=dtype)
                    key = int(parts[0])
                    result[key] = (label, parts[-1])
                    imgkeys.append(key)
            self.imglist = result
            self.seq = imgkeys
        elif isinstance(imglist, list):
            result, imgkeys = {}, []
            for index, img in enumerate(imglist, 1):
                key = str(index)
                if len(img) > 2:
                    label = np.array(img[:-1], dtype=dtype)
                elif isinstance(img[0], numbers.Number):
                    label = np.array([img[0]], dtype=dtype)
                else:
                    label = np.array(img[0], dtype=dtype)
                result[key] = (label, img[-1])
                imgkeys.append(key)
            self.imglist = result
            self.seq = imgkeys
        elif self.imgidx is not None and (shuffle or num_parts > 1):
            self.seq = self.imgidx
        self.path_root = path_root
        self.check_data_shape(data_shape)
        self.provide_data = [_io.DataDesc(data_name, (batch_size,) + tuple(data_shape), dtype)]
        if label_width > 1:
            self.provide_label = [_io.DataDesc(label_name, (batch_size, label_width), dtype)]
        else:
            self.provide_label = [_io.DataDesc(label_name, (batch_size,), dtype)]
        self.batch_size = batch_size
        self.data_shape = tuple(data_shape)
        self.label_width = label_width
        self.shuffle = shuffle
        self.dtype = dtype
        if self.seq is not None and num_parts > 1:
            if not 0 <= part_index < num_parts:
                raise ValueError("need 0 <= part_index < num_parts")
            n = len(self.seq)
            step = n // num_parts
            start = step * part_index
            self.seq = self.seq[start:start + step]
        self.auglist = CreateAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.cur = 0
        self._allow_read = True
        self.last_batch_handle = last_batch_handle
        self.num_image = len(self.seq) if self.seq is not None else None
        self._cache_data = None
        self._cache_label = None
        self._cache_idx = None
        self.reset()

    def reset(self):
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.last_batch_handle != "roll_over" or self._cache_data is None:
            if self.imgrec is not None:
                self.imgrec.reset()
            self.cur = 0
            if self._allow_read is False:
                self._allow_read = True

    def hard_reset(self):
        """Resets, dropping any rolled-over samples."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._allow_read = True
        self._cache_data = None
        self._cache_label = None
        self._cache_idx = None

    def next_sample(self):
        """(label, encoded image bytes) of the next sample; StopIteration at the end."""
        if self._allow_read is False:
            raise StopIteration
        if self.seq is not None:
            if self.cur < self.num_image:
                idx = self.seq[self.cur]
            else:
                if self.last_batch_handle != "discard":
                    self.cur = 0
                raise StopIteration
            self.cur += 1
            if self.imgrec is not None:
                s = self.imgrec.read_idx(idx)
                header, img = recordio.unpack(s)
                if self.imglist is None:
                    return header.label, img
                return self.imglist[idx][0], img
            label, fname = self.imglist[idx]
            return label, self.read_image(fname)
        s = self.imgrec.read()
        if s is None:
            if self.last_batch_handle != "discard":
                self.imgrec.reset()
            raise StopIteration
        header, img = recordio.unpack(s)
        return header.label, img

    def _batchify(self, batch_data, batch_label, start=0):
        i = start
        batch_size = self.batch_size
        try:
            while i < batch_size:
                label, s = self.next_sample()
                data = self.imdecode(s)
                try:
                    self.check_valid_image(data)
                except RuntimeError as e:
                    logging.debug("Invalid image, skipping:  %s", str(e))
                    continue
                data = self.augmentation_transform(data)
                if i >= batch_size:
                    raise AssertionError("Batch size must be multiples of augmenter output "
                                         "length")
                batch_data[i] = self.postprocess_data(data)
                batch_label[i] = np.asarray(_np(label)).reshape(batch_label[i].shape)
                i += 1
        except StopIteration:
            if not i:
                raise StopIteration
        return i

    def next(self):
        batch_size = self.batch_size
        c, h, w = self.data_shape
        if self._cache_data is not None:
            if self._cache_idx is None:
                raise AssertionError("Cache index is required")
            batch_data = self._cache_data
            batch_label = self._cache_label
            i = self._cache_idx
        else:
            batch_data = np.zeros((batch_size, c, h, w), dtype=self.dtype)
            batch_label = np.zeros(self.provide_label[0][1], dtype=self.dtype)
            i = self._batchify(batch_data, batch_label)
        pad = batch_size - i
        if pad != 0:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._cache_data is None:
                self._cache_data = batch_data
                self._cache_label = batch_label
                self._cache_idx = i
                raise StopIteration
            _ = self._batchify(batch_data, batch_label, i)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._cache_data = None
                self._cache_label = None
                self._cache_idx = None
        nd = _nd()
        return _io.DataBatch([nd.array(batch_data, dtype=batch_data.dtype)],
                             [nd.array(batch_label, dtype=batch_label.dtype)], pad=pad)

    def check_data_shape(self, data_shape):
        if not len(data_shape) == 3:
            raise ValueError("data_shape should have length 3, with dimensions CxHxW")
        if not data_shape[0] == 3:
            raise ValueError("This iterator expects inputs to have 3 channels.")

    def check_valid_image(self, data):
        if len(data[0].shape) == 0:
            raise RuntimeError("Data shape is wrong")

    def imdecode(self, s):
        """Decodes the bytes of one image (RGB HWC)."""
        def locate():
            if self.seq is not None:
                idx = self.seq[(self.cur % self.num_image) - 1]
            else:
                idx = (self.cur % self.num_image) - 1 if self.num_image else self.cur
            if self.imglist is not None:
                _, fname = self.imglist[idx]
                return "Broken image filename: {}".format(fname)
            return "Broken image index: {}".format(idx)
        try:
            img = imdecode(s)
        except Exception as e:
            raise RuntimeError("{}, {}".format(locate(), e)) from None
        return img

    def read_image(self, fname):
        """Bytes of the image file ``fname`` (under path_root)."""
        path = os.path.join(self.path_root, fname) if self.path_root is not None else fname
        try:
            with open(path, "rb") as fin:
                return fin.read()
        except OSError as e:
            raise MXNetError("ImageIter: cannot read image '%s': %s" % (path, e.strerror or e))

    def augmentation_transform(self, data):
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum):
        """HWC -> CHW numpy."""
        return np.transpose(_np(datum), axes=(2, 0, 1))
