"""Image decoding, resizing, cropping and augmentation (``mx.image`` / ``mx.img``), as in
MXNet 1.x: images are HWC NDArrays (uint8 after decoding, RGB unless ``to_rgb=False``),
OpenCV does the decoding and resizing (so results equal MXNet's), and ``ImageIter``
batches images from a RecordIO file or an image list with a list of Augmenters.

Needs OpenCV (``pip install opencv-python-headless``); without it every function that
decodes or resizes raises ImportError naming the package."""
import json
import logging
import numbers
import os
import random
import sys

import numpy as np

from .base import MXNetError
from . import io as _io
from . import recordio

__all__ = ["imread", "imdecode", "imresize", "scale_down", "copyMakeBorder", "resize_short",
           "fixed_crop", "random_crop", "center_crop", "color_normalize", "random_size_crop",
           "imrotate", "random_rotate", "Augmenter", "SequentialAug", "RandomOrderAug",
           "ResizeAug", "ForceResizeAug", "RandomCropAug", "RandomSizedCropAug",
           "CenterCropAug", "BrightnessJitterAug", "ContrastJitterAug",
           "SaturationJitterAug", "HueJitterAug", "ColorJitterAug", "LightingAug",
           "ColorNormalizeAug", "RandomGrayAug", "HorizontalFlipAug", "CastAug",
           "CreateAugmenter", "ImageIter"]

image = sys.modules[__name__]  # MXNet code says mx.image.image.imread


def _cv2():
    try:
        import cv2
    except ImportError as e:
        raise ImportError("mx.image needs OpenCV: pip install opencv-python-headless") from e
    return cv2


def _nd():
    return _io._nd()


def _np(x):
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    return np.asarray(x)


def _wrap(a, out=None):
    """NDArray of numpy ``a`` (its dtype kept); written into ``out`` when given."""
    a = np.ascontiguousarray(a)
    if out is not None:
        if tuple(out.shape) != a.shape:
            raise ValueError("out has shape %s, result is %s" % (tuple(out.shape), a.shape))
        out[:] = a.astype(np.dtype(out.dtype), copy=False)
        return out
    return _nd().array(a, dtype=a.dtype)


def _ensure_3d(img):
    return img[:, :, None] if img.ndim == 2 else img


def imread(filename, flag=1, to_rgb=True, out=None):
    """Reads an image file into an HWC uint8 NDArray (``flag`` 1: colour, 0: grayscale,
    -1: unchanged; ``to_rgb``: RGB instead of OpenCV's BGR)."""
    if not os.path.isfile(filename):
        raise MXNetError("imread: cannot open image file '%s': no such file" % filename)
    with open(filename, "rb") as f:
        buf = f.read()
    try:
        return imdecode(buf, flag, to_rgb, out)
    except MXNetError as e:
        raise MXNetError("imread: '%s': %s" % (filename, e)) from None


def imdecode(buf, flag=1, to_rgb=True, out=None, **kwargs):
    """Decodes an encoded image (bytes, bytearray, numpy uint8 or NDArray) into an HWC
    uint8 NDArray."""
    cv2 = _cv2()
    if hasattr(buf, "asnumpy"):
        buf = buf.asnumpy().astype(np.uint8).tobytes()
    elif isinstance(buf, np.ndarray):
        buf = buf.astype(np.uint8, copy=False).tobytes()
    buf = bytes(buf)
    if len(buf) == 0:
        raise MXNetError("imdecode: empty buffer")
    img = cv2.imdecode(np.frombuffer(buf, np.uint8), int(flag))
    if img is None:
        raise MXNetError("imdecode: cannot decode image (%d bytes, starting %r): not a "
                         "supported image format" % (len(buf), buf[:8]))
    img = _ensure_3d(img)
    if to_rgb and img.shape[2] >= 3:
        img = img[:, :, [2, 1, 0] + list(range(3, img.shape[2]))]
    return _wrap(img, out)


def scale_down(src_size, size):
    """Shrinks the crop ``size`` (w, h) to fit in ``src_size`` (w, h), keeping its ratio."""
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def copyMakeBorder(src, top, bot, left, right, type=0, values=0.0, out=None):
    """Pads an HWC image (OpenCV border types: 0 constant, 1 replicate, 2 reflect,
    3 wrap, 4 reflect_101)."""
    cv2 = _cv2()
    a = _np(src)
    vals = values if isinstance(values, (list, tuple)) else [values] * 4
    res = cv2.copyMakeBorder(a, int(top), int(bot), int(left), int(right), int(type),
                             value=tuple(float(v) for v in vals))
    if res.ndim == 2 and a.ndim == 3:
        res = res[:, :, None]
    return _wrap(res, out)


def _get_interp_method(interp, sizes=()):
    """OpenCV interpolation from MXNet's code: 0 nearest, 1 bilinear, 2 bicubic, 3 area,
    4 lanczos; 9 picks by the size change (area to shrink, cubic to enlarge, else
    bilinear), 10 picks at random."""
    if interp == 9:
        if sizes:
            oh, ow, nh, nw = sizes
            if nh > oh and nw > ow:
                return 2
            if nh < oh and nw < ow:
                return 3
            return 1
        return 2
    if interp == 10:
        return random.randint(0, 4)
    if interp not in (0, 1, 2, 3, 4):
        raise MXNetError("Unknown interp method %d (0-4, 9 = by size change, 10 = random)"
                         % interp)
    return interp


def imresize(src, w, h, interp=1, out=None):
    """Resizes an HWC image to width ``w`` and height ``h`` with OpenCV."""
    cv2 = _cv2()
    a = _np(src)
    if int(w) <= 0 or int(h) <= 0:
        raise MXNetError("imresize: target size %dx%d must be positive" % (w, h))
    orig_dtype = a.dtype
    if a.dtype not in (np.uint8, np.float32, np.float64, np.uint16, np.int16):
        a = a.astype(np.float32)
    res = cv2.resize(a, (int(w), int(h)), interpolation=_get_interp_method(
        interp, (a.shape[0], a.shape[1], int(h), int(w))))
    if res.ndim == 2 and a.ndim == 3:
        res = res[:, :, None]
    return _wrap(res.astype(orig_dtype, copy=False), out)


def resize_short(src, size, interp=2):
    """Resizes so the shorter side is ``size`` (the longer scaled by the same ratio)."""
    h, w = src.shape[0], src.shape[1]
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, interp=_get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src, x0, y0, w, h, size=None, interp=2):
    """Crops the (x0, y0, w, h) box, then resizes it to ``size`` (w, h) if given."""
    a = _np(src)[int(y0):int(y0) + int(h), int(x0):int(x0) + int(w)]
    out = _wrap(a)
    if size is not None and (w, h) != tuple(size):
        sizes = (h, w, size[1], size[0])
        out = imresize(out, size[0], size[1], interp=_get_interp_method(interp, sizes))
    return out


def random_crop(src, size, interp=2):
    """Random crop of ``size`` (w, h), scaled down to fit; returns (image, (x0, y0, w, h))."""
    h, w = src.shape[0], src.shape[1]
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    out = fixed_crop(src, x0, y0, new_w, new_h, size, interp)
    return out, (x0, y0, new_w, new_h)


def center_crop(src, size, interp=2):
    """Centred crop of ``size`` (w, h), scaled down to fit; returns (image, box)."""
    h, w = src.shape[0], src.shape[1]
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    out = fixed_crop(src, x0, y0, new_w, new_h, size, interp)
    return out, (x0, y0, new_w, new_h)


def color_normalize(src, mean, std=None):
    """(src - mean) / std, broadcasting over the channel axis."""
    a = _np(src).astype(np.float32)
    if mean is not None:
        a = a - _np(mean).astype(np.float32)
    if std is not None:
        a = a / _np(std).astype(np.float32)
    return _wrap(a)


def random_size_crop(src, size, area, ratio, interp=2, **kwargs):
    """Random crop with a random area fraction ``area`` (float or (min, max)) and aspect
    ratio in ``ratio`` (min, max), resized to ``size``; falls back to center_crop."""
    h, w = src.shape[0], src.shape[1]
    src_area = h * w
    if "min_area" in kwargs:
        area = kwargs.pop("min_area")
    if isinstance(area, numbers.Number):
        area = (area, 1.0)
    for _ in range(10):
        target_area = random.uniform(area[0], area[1]) * src_area
        log_ratio = (np.log(ratio[0]), np.log(ratio[1]))
        new_ratio = np.exp(random.uniform(*log_ratio))
        new_w = int(round(np.sqrt(target_area * new_ratio)))
        new_h = int(round(np.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = random.randint(0, w - new_w)
            y0 = random.randint(0, h - new_h)
            out = fixed_crop(src, x0, y0, new_w, new_h, size, interp)
            return out, (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)


def imrotate(src, rotation_degrees, zoom_in=False, zoom_out=False):
    """Rotates CHW (or NCHW) float images counter-clockwise by ``rotation_degrees`` about
    their centre (bilinear, zero outside). ``zoom_in`` scales up so no zero border shows,
    ``zoom_out`` scales down so the whole image stays visible."""
    if zoom_in and zoom_out:
        raise ValueError("`zoom_in` and `zoom_out` cannot be both True")
    a = _np(src)
    if a.dtype != np.float32:
        raise TypeError("Only `float32` images are supported by this function")
    expanded = a.ndim == 3
    if expanded:
        a = a[None]
    if a.ndim != 4:
        raise ValueError("imrotate needs a CHW or NCHW image")
    n, c, h, w = a.shape
    rot = _np(rotation_degrees) if not isinstance(rotation_degrees, numbers.Number) else \
        np.array([rotation_degrees], np.float32)
    rot = np.asarray(rot, np.float32).reshape(-1)
    if rot.size == 1:
        rot = np.repeat(rot, n)
    if rot.size != n:
        raise ValueError("one rotation angle per image is needed")
    cv2 = _cv2()
    out = np.zeros_like(a)
    for i in range(n):
        theta = np.deg2rad(rot[i])
        scale = 1.0
        if zoom_in or zoom_out:
            cos, sin = abs(np.cos(theta)), abs(np.sin(theta))
            # the rotated frame's bounding box relative to the image
            fit = max((w * cos + h * sin) / w, (w * sin + h * cos) / h)
            scale = fit if zoom_in else 1.0 / fit
        m = cv2.getRotationMatrix2D(((w - 1) / 2.0, (h - 1) / 2.0), float(rot[i]), scale)
        for ch in range(c):
            out[i, ch] = cv2.warpAffine(a[i, ch], m, (w, h), flags=cv2.INTER_LINEAR,
                                        borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    return _wrap(out[0] if expanded else out)


def random_rotate(src, angle_limits, zoom_in=False, zoom_out=False):
    """imrotate by an angle drawn uniformly from ``angle_limits`` (per image for NCHW)."""
    n = 1 if len(src.shape) == 3 else src.shape[0]
    angles = np.random.uniform(angle_limits[0], angle_limits[1], size=n).astype(np.float32)
    return imrotate(src, angles if n > 1 or len(src.shape) == 4 else float(angles[0]),
                    zoom_in=zoom_in, zoom_out=zoom_out)


# ---------------------------------------------------------------------------------------
# Augmenters: callables on one HWC NDArray.

class Augmenter(object):
    """Base augmenter; keeps its keyword arguments for ``dumps()``."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        for k, v in self._kwargs.items():
            if hasattr(v, "asnumpy"):
                v = v.asnumpy()
            if isinstance(v, np.ndarray):
                self._kwargs[k] = v.tolist()

    def dumps(self):
        """[class name in lower case, kwargs] as JSON."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src):
        raise NotImplementedError("Must override implementation.")


class SequentialAug(Augmenter):
    """Applies ``ts`` in order."""

    def __init__(self, ts):
        super(SequentialAug, self).__init__()
        self.ts = ts

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.ts]]

    def __call__(self, src):
        for aug in self.ts:
            src = aug(src)
        return src


class RandomOrderAug(Augmenter):
    """Applies ``ts`` in a random order."""

    def __init__(self, ts):
        super(RandomOrderAug, self).__init__()
        self.ts = ts

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.ts]]

    def __call__(self, src):
        random.shuffle(self.ts)
        for t in self.ts:
            src = t(src)
        return src


class ResizeAug(Augmenter):
    """Shorter side to ``size``."""

    def __init__(self, size, interp=2):
        super(ResizeAug, self).__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(Augmenter):
    """Resizes to ``size`` (w, h) regardless of the aspect ratio."""

    def __init__(self, size, interp=2):
        super(ForceResizeAug, self).__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        sizes = (src.shape[0], src.shape[1], self.size[1], self.size[0])
        return imresize(src, *self.size, interp=_get_interp_method(self.interp, sizes))


class RandomCropAug(Augmenter):
    """Random crop of ``size`` (w, h)."""

    def __init__(self, size, interp=2):
        super(RandomCropAug, self).__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """random_size_crop with ``area`` and ``ratio``."""

    def __init__(self, size, area, ratio, interp=2, **kwargs):
        super(RandomSizedCropAug, self).__init__(size=size, area=area, ratio=ratio,
                                                 interp=interp)
        self.size = size
        self.area = kwargs.pop("min_area", area)
        self.ratio, self.interp = ratio, interp

    def __call__(self, src):
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(Augmenter):
    """Centred crop of ``size`` (w, h)."""

    def __init__(self, size, interp=2):
        super(CenterCropAug, self).__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return center_crop(src, self.size, self.interp)[0]


_GRAY_COEF = np.array([0.299, 0.587, 0.114], np.float32)


class BrightnessJitterAug(Augmenter):
    """Multiplies by 1 + uniform(-brightness, brightness)."""

    def __init__(self, brightness):
        super(BrightnessJitterAug, self).__init__(brightness=brightness)
        self.brightness = brightness

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self.brightness, self.brightness)
        return _wrap(_np(src).astype(np.float32) * np.float32(alpha))


class ContrastJitterAug(Augmenter):
    """Blends with the mean gray level by a random factor."""

    def __init__(self, contrast):
        super(ContrastJitterAug, self).__init__(contrast=contrast)
        self.contrast = contrast

    def __call__(self, src):
        alpha = np.float32(1.0 + random.uniform(-self.contrast, self.contrast))
        a = _np(src).astype(np.float32)
        gray = a * _GRAY_COEF
        gray = (3.0 * (1.0 - alpha) / gray.size) * np.sum(gray)
        return _wrap(a * alpha + np.float32(gray))


class SaturationJitterAug(Augmenter):
    """Blends with the per-pixel gray image by a random factor."""

    def __init__(self, saturation):
        super(SaturationJitterAug, self).__init__(saturation=saturation)
        self.saturation = saturation

    def __call__(self, src):
        alpha = np.float32(1.0 + random.uniform(-self.saturation, self.saturation))
        a = _np(src).astype(np.float32)
        gray = np.sum(a * _GRAY_COEF, axis=2, keepdims=True) * (1.0 - alpha)
        return _wrap(a * alpha + gray)


class HueJitterAug(Augmenter):
    """Rotates the hue by uniform(-hue, hue) * 180 degrees (in YIQ space)."""

    def __init__(self, hue):
        super(HueJitterAug, self).__init__(hue=hue)
        self.hue = hue
        self.tyiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321],
                              [0.211, -0.523, 0.311]])
        self.ityiq = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647],
                               [1.0, -1.107, 1.705]])

    def __call__(self, src):
        alpha = random.uniform(-self.hue, self.hue)
        u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
        bt = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = np.dot(np.dot(self.ityiq, bt), self.tyiq).T
        return _wrap(np.dot(_np(src).astype(np.float32), t.astype(np.float32)))


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter in random order."""

    def __init__(self, brightness, contrast, saturation):
        ts = []
        if brightness > 0:
            ts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            ts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            ts.append(SaturationJitterAug(saturation))
        super(ColorJitterAug, self).__init__(ts)


class LightingAug(Augmenter):
    """AlexNet-style PCA lighting noise with std ``alphastd``."""

    def __init__(self, alphastd, eigval, eigvec):
        super(LightingAug, self).__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd = alphastd
        self.eigval = np.asarray(eigval)
        self.eigvec = np.asarray(eigvec)

    def __call__(self, src):
        alpha = np.random.normal(0, self.alphastd, size=(3,))
        rgb = np.dot(self.eigvec * alpha, self.eigval)
        return _wrap(_np(src).astype(np.float32) + rgb.astype(np.float32))


class ColorNormalizeAug(Augmenter):
    """(src - mean) / std."""

    def __init__(self, mean, std):
        super(ColorNormalizeAug, self).__init__(mean=mean, std=std)
        self.mean = None if mean is None else _np(mean).astype(np.float32)
        self.std = None if std is None else _np(std).astype(np.float32)

    def __call__(self, src):
        return color_normalize(src, self.mean, self.std)


class RandomGrayAug(Augmenter):
    """With probability ``p``, replaces the image by its gray version (3 channels)."""

    def __init__(self, p):
        super(RandomGrayAug, self).__init__(p=p)
        self.p = p
        self.mat = np.array([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]],
                            np.float32)

    def __call__(self, src):
        if random.random() < self.p:
            return _wrap(np.dot(_np(src).astype(np.float32), self.mat))
        return src


class HorizontalFlipAug(Augmenter):
    """Mirrors left-right with probability ``p``."""

    def __init__(self, p):
        super(HorizontalFlipAug, self).__init__(p=p)
        self.p = p

    def __call__(self, src):
        if random.random() < self.p:
            return _wrap(_np(src)[:, ::-1])
        return src


class CastAug(Augmenter):
    """Casts to ``typ`` (float32 by default)."""

    def __init__(self, typ="float32"):
        super(CastAug, self).__init__(type=typ)
        self.typ = typ

    def __call__(self, src):
        return _wrap(_np(src).astype(self.typ))


def CreateAugmenter(data_shape, resize=0, rand_crop=False, rand_resize=False, rand_mirror=False,
                    mean=None, std=None, brightness=0, contrast=0, saturation=0, hue=0,
                    pca_noise=0, rand_gray=0, inter_method=2):
    """The standard augmenter list for ``data_shape`` (C, H, W): resize, crop (random,
    random-sized or centred), colour jitter, hue, lighting, gray, mirror, cast to float32,
    normalisation (``mean=True`` / ``std=True`` mean the ImageNet values)."""
    auglist = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (data_shape[2], data_shape[1])
    if rand_resize:
        if not rand_crop:
            raise ValueError("rand_resize needs rand_crop")
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0),
                                          inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        eigval = np.array([55.46, 4.794, 1.148])
        eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                           [-0.5836, -0.6948, 0.4203]])
        auglist.append(LightingAug(pca_noise, eigval, eigvec))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    if mean is True:
        mean = np.array([123.68, 116.28, 103.53])
    elif mean is not None:
        mean = _np(mean)
        if mean.shape[0] not in (1, 3):
            raise ValueError("mean needs 1 or 3 values")
    if std is True:
        std = np.array([58.395, 57.12, 57.375])
    elif std is not None:
        std = _np(std)
        if std.shape[0] not in (1, 3):
            raise ValueError("std needs 1 or 3 values")
    if mean is not None or std is not None:
        auglist.append(ColorNormalizeAug(mean, std))
    return auglist


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


detection = image  # MXNet has these in mx.image.detection
__all__ += ["DetAugmenter", "DetBorrowAug", "DetRandomSelectAug", "DetHorizontalFlipAug",
            "DetRandomCropAug", "DetRandomPadAug", "CreateMultiRandCropAugmenter",
            "CreateDetAugmenter", "ImageDetIter"]
