"""Image decoding, resizing, cropping and augmentation (``mx.image`` / ``mx.img``), as in
MXNet 1.x: images are HWC NDArrays (uint8 after decoding, RGB unless ``to_rgb=False``),
OpenCV does the decoding and resizing (so results equal MXNet's), and ``ImageIter``
(image_iter.py) batches images from a RecordIO file or an image list with a list of
Augmenters; the detection augmenters and ``ImageDetIter`` are in image_detection.py.

Needs OpenCV (``pip install opencv-python-headless``); without it every function that
decodes or resizes raises ImportError naming the package."""
import json
import numbers
import os
import random
import sys

import numpy as np

from .base import MXNetError
from . import io as _io

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


# ImageIter (image_iter.py) and the detection augmenters and ImageDetIter
# (image_detection.py) build on the functions and Augmenters above, so they are imported
# last; every name stays importable from here, as in MXNet.
from .image_iter import ImageIter  # noqa: E402,F401
from .image_detection import (DetAugmenter, DetBorrowAug, DetRandomSelectAug,  # noqa: E402,F401
                              DetHorizontalFlipAug, DetRandomCropAug, DetRandomPadAug,
                              CreateMultiRandCropAugmenter, CreateDetAugmenter, ImageDetIter)

detection = image  # MXNet has these in mx.image.detection
__all__ += ["DetAugmenter", "DetBorrowAug", "DetRandomSelectAug", "DetHorizontalFlipAug",
            "DetRandomCropAug", "DetRandomPadAug", "CreateMultiRandCropAugmenter",
            "CreateDetAugmenter", "ImageDetIter"]
