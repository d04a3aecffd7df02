"""Object detection data (``mx.image`` / ``mx.image.detection`` in MXNet): detection
augmenters, which transform an image and its box labels together, and ImageDetIter.
Exported by ``loom.image``."""
import json
import logging
import numbers
import random

import numpy as np

from . import io as _io
from .image import (Augmenter, CastAug, ColorJitterAug, ColorNormalizeAug, ForceResizeAug,
                    HueJitterAug, LightingAug, RandomGrayAug, ResizeAug, _nd, _np, _wrap,
                    fixed_crop)
from .image_iter import ImageIter

__all__ = ["DetAugmenter", "DetBorrowAug", "DetRandomSelectAug", "DetHorizontalFlipAug",
           "DetRandomCropAug", "DetRandomPadAug", "CreateMultiRandCropAugmenter",
           "CreateDetAugmenter", "ImageDetIter"]


# ---------------------------------------------------------------------------------------
# Object detection: labels are (num_objects, width) arrays of
# [class, xmin, ymin, xmax, ymax, ...] with coordinates normalised to [0, 1].

class DetAugmenter(object):
    """Base detection augmenter: ``__call__(src, label) -> (src, label)``."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        for k, v in self._kwargs.items():
            if hasattr(v, "asnumpy"):
                v = v.asnumpy()
            if isinstance(v, np.ndarray):
                self._kwargs[k] = v.tolist()

    def dumps(self):
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src, label):
        raise NotImplementedError("Must override implementation.")


class DetBorrowAug(DetAugmenter):
    """Applies an image-only Augmenter; labels pass through."""

    def __init__(self, augmenter):
        if not isinstance(augmenter, Augmenter):
            raise TypeError("DetBorrowAug needs an Augmenter, got %s" % type(augmenter))
        super(DetBorrowAug, self).__init__(augmenter=augmenter.dumps())
        self.augmenter = augmenter

    def dumps(self):
        return [self.__class__.__name__.lower(), self.augmenter.dumps()]

    def __call__(self, src, label):
        return self.augmenter(src), label


class DetRandomSelectAug(DetAugmenter):
    """Applies one augmenter picked at random from ``aug_list``, or none with probability
    ``skip_prob``."""

    def __init__(self, aug_list, skip_prob=0):
        super(DetRandomSelectAug, self).__init__(skip_prob=skip_prob)
        if not isinstance(aug_list, (list, tuple)):
            aug_list = [aug_list]
        self.aug_list = list(aug_list)
        self.skip_prob = skip_prob

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.aug_list]]

    def __call__(self, src, label):
        if not self.aug_list or random.random() < self.skip_prob:
            return src, label
        random.shuffle(self.aug_list)
        return self.aug_list[0](src, label)


class DetHorizontalFlipAug(DetAugmenter):
    """Mirrors image and boxes with probability ``p``."""

    def __init__(self, p):
        super(DetHorizontalFlipAug, self).__init__(p=p)
        self.p = p

    def __call__(self, src, label):
        if random.random() < self.p:
            src = _wrap(_np(src)[:, ::-1])
            label = np.array(label, copy=True)
            xmin = 1.0 - label[:, 3]
            label[:, 3] = 1.0 - label[:, 1]
            label[:, 1] = xmin
        return src, label


def _box_intersect(boxes, box):
    """Intersection areas of (n, 4) normalised boxes with one box."""
    ix0 = np.maximum(boxes[:, 0], box[0])
    iy0 = np.maximum(boxes[:, 1], box[1])
    ix1 = np.minimum(boxes[:, 2], box[2])
    iy1 = np.minimum(boxes[:, 3], box[3])
    return np.maximum(ix1 - ix0, 0) * np.maximum(iy1 - iy0, 0)


class DetRandomCropAug(DetAugmenter):
    """Random crop (area fraction in ``area_range``, aspect ratio in
    ``aspect_ratio_range``) that keeps at least ``min_object_covered`` of some object;
    objects less than ``min_eject_coverage`` inside the crop are dropped, the others clipped
    and renormalised. Gives up (no crop) after ``max_attempts``."""

    def __init__(self, min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                 area_range=(0.05, 1.0), min_eject_coverage=0.3, max_attempts=50):
        if not isinstance(aspect_ratio_range, (tuple, list)):
            aspect_ratio_range = (1 - aspect_ratio_range, 1 + aspect_ratio_range)
        if not isinstance(area_range, (tuple, list)):
            area_range = (1 - area_range, 1 + area_range)
        super(DetRandomCropAug, self).__init__(
            min_object_covered=min_object_covered, aspect_ratio_range=aspect_ratio_range,
            area_range=area_range, min_eject_coverage=min_eject_coverage,
            max_attempts=max_attempts)
        self.min_object_covered = min_object_covered
        self.min_eject_coverage = min_eject_coverage
        self.max_attempts = max_attempts
        self.aspect_ratio_range = aspect_ratio_range
        self.area_range = area_range
        self.enabled = (area_range[1] > 0 and area_range[0] <= area_range[1]
                        and aspect_ratio_range[0] > 0
                        and aspect_ratio_range[0] <= aspect_ratio_range[1])

    def __call__(self, src, label):
        crop = self._propose(label, src.shape[0], src.shape[1])
        if crop is None:
            return src, label
        x, y, w, h, label = crop
        return fixed_crop(src, x, y, w, h, None), label

    def _update_labels(self, label, box, height, width):
        """Labels relative to the crop ``box`` (x0, y0, x1, y1 normalised)."""
        boxes = label[:, 1:5]
        areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        inter = _box_intersect(boxes, box)
        coverage = inter / np.maximum(areas, 1e-12)
        keep = coverage > self.min_eject_coverage
        if not keep.any():
            return None
        out = np.array(label[keep], copy=True)
        bw, bh = box[2] - box[0], box[3] - box[1]
        out[:, (1, 3)] = np.clip((out[:, (1, 3)] - box[0]) / bw, 0, 1)
        out[:, (2, 4)] = np.clip((out[:, (2, 4)] - box[1]) / bh, 0, 1)
        valid = (out[:, 3] > out[:, 1]) & (out[:, 4] > out[:, 2])
        return out[valid] if valid.any() else None

    def _propose(self, label, height, width):
        if not self.enabled or height <= 0 or width <= 0:
            return None
        boxes = label[:, 1:5]
        for _ in range(self.max_attempts):
            area = random.uniform(*self.area_range)
            ratio = random.uniform(*self.aspect_ratio_range)
            w = np.sqrt(area * ratio)
            h = np.sqrt(area / ratio)
            if w > 1 or h > 1 or w <= 0 or h <= 0:
                continue
            x0 = random.uniform(0, 1 - w)
            y0 = random.uniform(0, 1 - h)
            box = np.array([x0, y0, x0 + w, y0 + h])
            if label.shape[0]:
                areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
                cover = _box_intersect(boxes, box) / np.maximum(areas, 1e-12)
                if cover.max() < self.min_object_covered:
                    continue
            new_label = self._update_labels(label, box, height, width)
            if new_label is None:
                continue
            px, py = int(x0 * width), int(y0 * height)
            pw, ph = max(1, int(w * width)), max(1, int(h * height))
            return px, py, pw, ph, new_label
        return None


class DetRandomPadAug(DetAugmenter):
    """Places the image on a larger canvas filled with ``pad_val`` (area factor in
    ``area_range`` >= 1, aspect ratio in ``aspect_ratio_range``), moving the boxes."""

    def __init__(self, aspect_ratio_range=(0.75, 1.33), area_range=(1.0, 3.0),
                 max_attempts=50, pad_val=(128, 128, 128)):
        if not isinstance(pad_val, (list, tuple)):
            pad_val = (pad_val,)
        if not isinstance(aspect_ratio_range, (list, tuple)):
            aspect_ratio_range = (1 - aspect_ratio_range, 1 + aspect_ratio_range)
        if not isinstance(area_range, (list, tuple)):
            area_range = (1.0, 1.0 + area_range)
        super(DetRandomPadAug, self).__init__(aspect_ratio_range=aspect_ratio_range,
                                              area_range=area_range,
                                              max_attempts=max_attempts, pad_val=pad_val)
        self.pad_val = pad_val
        self.aspect_ratio_range = aspect_ratio_range
        self.area_range = area_range
        self.max_attempts = max_attempts
        self.enabled = (area_range[1] > 1.0 and area_range[0] <= area_range[1]
                        and aspect_ratio_range[0] > 0
                        and aspect_ratio_range[0] <= aspect_ratio_range[1])

    def __call__(self, src, label):
        if not self.enabled:
            return src, label
        height, width = src.shape[0], src.shape[1]
        for _ in range(self.max_attempts):
            scale = random.uniform(max(1.0, self.area_range[0]), self.area_range[1])
            ratio = random.uniform(*self.aspect_ratio_range)
            if ratio <= 0:
                continue
            h = int(round(np.sqrt(scale * height * width / ratio)))
            w = int(round(h * ratio))
            if h < height or w < width:
                continue
            y = random.randint(0, h - height)
            x = random.randint(0, w - width)
            a = _np(src)
            canvas = np.empty((h, w, a.shape[2]), a.dtype)
            canvas[:] = np.asarray(self.pad_val, a.dtype)[:a.shape[2]] if \
                len(self.pad_val) >= a.shape[2] else self.pad_val[0]
            canvas[y:y + height, x:x + width] = a
            out = np.array(label, copy=True)
            out[:, (1, 3)] = (out[:, (1, 3)] * width + x) / w
            out[:, (2, 4)] = (out[:, (2, 4)] * height + y) / h
            return _wrap(canvas), out
        return src, label


def CreateMultiRandCropAugmenter(min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                                 area_range=(0.05, 1.0), min_eject_coverage=0.3,
                                 max_attempts=50, skip_prob=0):
    """DetRandomSelectAug over DetRandomCropAugs, one per value of the list-valued
    arguments (scalars are shared)."""
    def as_list(x):
        return x if isinstance(x, list) else [x]
    args = [as_list(min_object_covered), as_list(aspect_ratio_range), as_list(area_range),
            as_list(min_eject_coverage), as_list(max_attempts)]
    n = max(len(a) for a in args)
    args = [a * n if len(a) == 1 else a for a in args]
    if any(len(a) != n for a in args):
        raise ValueError("list arguments of CreateMultiRandCropAugmenter need equal lengths")
    augs = [DetRandomCropAug(*vals) for vals in zip(*args)]
    return DetRandomSelectAug(augs, skip_prob=skip_prob)


def CreateDetAugmenter(data_shape, resize=0, rand_crop=0, rand_pad=0, rand_gray=0,
                       rand_mirror=False, mean=None, std=None, brightness=0, contrast=0,
                       saturation=0, pca_noise=0, hue=0, inter_method=2,
                       min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                       area_range=(0.05, 3.0), min_eject_coverage=0.3, max_attempts=50,
                       pad_val=(127, 127, 127)):
    """The standard detection augmenter list: resize, random crop (probability
    ``rand_crop``), mirror, random pad (probability ``rand_pad``), forced resize to
    ``data_shape``, cast, colour jitter, hue, lighting, gray, normalisation."""
    auglist = []
    if resize > 0:
        auglist.append(DetBorrowAug(ResizeAug(resize, inter_method)))
    if rand_crop > 0:
        auglist.append(CreateMultiRandCropAugmenter(
            min_object_covered, aspect_ratio_range, (area_range[0], min(1.0, area_range[1])),
            min_eject_coverage, max_attempts, skip_prob=(1 - rand_crop)))
    if rand_mirror:
        auglist.append(DetHorizontalFlipAug(0.5))
    if rand_pad > 0:
        pad = DetRandomPadAug((min(aspect_ratio_range), max(aspect_ratio_range)),
                              (1.0, area_range[1]), max_attempts, pad_val)
        auglist.append(DetRandomSelectAug([pad], 1 - rand_pad))
    auglist.append(DetBorrowAug(ForceResizeAug((data_shape[2], data_shape[1]), inter_method)))
    auglist.append(DetBorrowAug(CastAug()))
    if brightness or contrast or saturation:
        auglist.append(DetBorrowAug(ColorJitterAug(brightness, contrast, saturation)))
    if hue:
        auglist.append(DetBorrowAug(HueJitterAug(hue)))
    if pca_noise > 0:
        eigval = np.array([55.46, 4.794, 1.148])
        eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                           [-0.5836, -0.6948, 0.4203]])
        auglist.append(DetBorrowAug(LightingAug(pca_noise, eigval, eigvec)))
    if rand_gray > 0:
        auglist.append(DetBorrowAug(RandomGrayAug(rand_gray)))
    if mean is True:
        mean = np.array([123.68, 116.28, 103.53])
    if std is True:
        std = np.array([58.395, 57.12, 57.375])
    if mean is not None or std is not None:
        auglist.append(DetBorrowAug(ColorNormalizeAug(mean, std)))
    return auglist


class ImageDetIter(ImageIter):
    """ImageIter for object detection. Each raw label is
    ``[A, B, (A - 2 more header values), obj0 (B values), obj1, ...]`` with objects
    ``[class, xmin, ymin, xmax, ymax, ...]`` in normalised coordinates; batches carry labels
    of shape (batch, max objects, B) padded with -1."""

    def __init__(self, batch_size, data_shape, path_imgrec=None, path_imglist=None,
                 path_root=None, path_imgidx=None, shuffle=False, part_index=0, num_parts=1,
                 aug_list=None, imglist=None, data_name="data", label_name="label",
                 last_batch_handle="pad", **kwargs):
        super(ImageDetIter, self).__init__(
            batch_size=batch_size, data_shape=data_shape, path_imgrec=path_imgrec,
            path_imglist=path_imglist, path_root=path_root, path_imgidx=path_imgidx,
            shuffle=shuffle, part_index=part_index, num_parts=num_parts, aug_list=[],
            imglist=imglist, data_name=data_name, label_name=label_name,
            last_batch_handle=last_batch_handle)
        self.auglist = CreateDetAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.label_shape = self._estimate_label_shape()
        self.provide_label = [_io.DataDesc(label_name, (self.batch_size,) + self.label_shape)]

    def _check_valid_label(self, label):
        if len(label.shape) != 2 or label.shape[1] < 5:
            raise RuntimeError("Label with shape (1+, 5+) required, %s received." % str(label))
        valid = np.where(np.logical_and(label[:, 0] >= 0, np.logical_and(
            label[:, 3] > label[:, 1], label[:, 4] > label[:, 2])))[0]
        if valid.size < 1:
            raise RuntimeError("Invalid label occurs.")

    def _estimate_label_shape(self):
        """(max objects, object width) over one pass of the data."""
        max_count, width = 0, 5
        self.reset()
        try:
            while True:
                label, _ = self.next_sample()
                label = self._parse_label(label)
                max_count = max(max_count, label.shape[0])
                width = label.shape[1]
        except StopIteration:
            pass
        self.reset()
        return (max_count, width)

    def _parse_label(self, label):
        if isinstance(label, numbers.Number) or hasattr(label, "asnumpy"):
            label = _np(label)
        raw = np.asarray(label, np.float32).ravel()
        if raw.size < 7:
            raise RuntimeError("Label shape is invalid: " + str(raw.shape))
        header_width, obj_width = int(raw[0]), int(raw[1])
        if header_width < 2 or obj_width < 5 or (raw.size - header_width) % obj_width != 0:
            raise RuntimeError("Label shape %s inconsistent with annotation width %d."
                               % (str(raw.shape), obj_width))
        out = np.reshape(raw[header_width:], (-1, obj_width))
        valid = np.where(np.logical_and(out[:, 3] > out[:, 1], out[:, 4] > out[:, 2]))[0]
        if valid.size < 1:
            raise RuntimeError("Encounter sample with no valid label.")
        return out[valid, :]

    def reshape(self, data_shape=None, label_shape=None):
        """Changes the output data and/or label shape."""
        if data_shape is not None:
            self.check_data_shape(data_shape)
            self.provide_data = [_io.DataDesc(self.provide_data[0][0],
                                              (self.batch_size,) + tuple(data_shape))]
            self.data_shape = tuple(data_shape)
        if label_shape is not None:
            self.check_label_shape(label_shape)
            self.provide_label = [_io.DataDesc(self.provide_label[0][0],
                                               (self.batch_size,) + tuple(label_shape))]
            self.label_shape = tuple(label_shape)

    def check_label_shape(self, label_shape):
        if not len(label_shape) == 2:
            raise ValueError("label_shape should have length 2")
        if label_shape[0] < self.label_shape[0]:
            raise ValueError("Attempts to reduce label count from %d to %d, not allowed."
                             % (self.label_shape[0], label_shape[0]))
        if label_shape[1] != self.provide_label[0][1][2]:
            raise ValueError("label_shape object width inconsistent: %d vs %d."
                             % (self.provide_label[0][1][2], label_shape[1]))

    def sync_label_shape(self, it, verbose=False):
        """Gives this iterator and ``it`` the same (larger) label shape; returns ``it``."""
        if not isinstance(it, ImageDetIter):
            raise TypeError("Synchronize with invalid iterator.")
        train_label_shape = self.label_shape
        val_label_shape = it.label_shape
        if train_label_shape[1] != val_label_shape[1]:
            raise ValueError("object width mismatch.")
        max_count = max(train_label_shape[0], val_label_shape[0])
        if max_count > train_label_shape[0]:
            self.reshape(None, (max_count, train_label_shape[1]))
        if max_count > val_label_shape[0]:
            it.reshape(None, (max_count, val_label_shape[1]))
        if verbose and max_count > min(train_label_shape[0], val_label_shape[0]):
            logging.info("Resized label_shape to (%d, %d).", max_count, train_label_shape[1])
        return it

    def augmentation_transform(self, data, label):  # pylint: disable=arguments-differ
        for aug in self.auglist:
            data, label = aug(data, label)
        return data, label

    def _batchify(self, batch_data, batch_label, start=0):
        i = start
        batch_size = self.batch_size
        try:
            while i < batch_size:
                label, s = self.next_sample()
                data = self.imdecode(s)
                try:
                    self.check_valid_image([data])
                    label = self._parse_label(label)
                    data, label = self.augmentation_transform(data, label)
                    self._check_valid_label(label)
                except RuntimeError as e:
                    logging.debug("Invalid image, skipping:  %s", str(e))
                    continue
                for datum in [data]:
                    if i >= batch_size:
                        raise AssertionError("Batch size must be multiples of augmenter "
                                             "output length")
                    batch_data[i] = self.postprocess_data(datum)
                    num_object = label.shape[0]
                    batch_label[i][0:num_object] = label
                    if num_object < batch_label[i].shape[0]:
                        batch_label[i][num_object:] = -1
                    i += 1
        except StopIteration:
            if not i:
                raise StopIteration
        return i

    def next(self):
        batch_size = self.batch_size
        c, h, w = self.data_shape
        if self._cache_data is not None:
            batch_data, batch_label, i = self._cache_data, self._cache_label, self._cache_idx
        else:
            batch_data = np.zeros((batch_size, c, h, w), dtype=np.float32)
            batch_label = np.full(self.provide_label[0][1], -1.0, dtype=np.float32)
            i = self._batchify(batch_data, batch_label)
        pad = batch_size - i
        if pad != 0:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._cache_data is None:
                self._cache_data, self._cache_label, self._cache_idx = batch_data, batch_label, i
                raise StopIteration
            self._batchify(batch_data, batch_label, i)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._cache_data = self._cache_label = self._cache_idx = None
        nd = _nd()
        return _io.DataBatch([nd.array(batch_data)], [nd.array(batch_label)], pad=pad)
