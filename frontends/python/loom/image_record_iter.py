"""ImageRecordIter (``mx.io.ImageRecordIter``): images from a RecordIO file decoded with
OpenCV in a thread pool, MXNet's augmentations, batches assembled ahead in a bounded queue.
Exported by ``loom.io``, where MXNet has it; the file-iterator machinery it shares with
CSVIter and MNISTIter (``_FileIter``, ``_BatchPlan``) lives there."""
import os
import queue
import threading
import weakref

import numpy as np

from .base import MXNetError
from .io import _BatchPlan, _FileIter, _nd, _shape_tuple

__all__ = ["ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter"]


def _cv2(what="mx.io.ImageRecordIter"):
    try:
        import cv2
    except ImportError as e:
        raise ImportError("%s needs OpenCV for image decoding: pip install "
                          "opencv-python-headless" % what) from e
    return cv2


def _inter_method(code, old_w, old_h, new_w, new_h, rng):
    """OpenCV interpolation flag from MXNet's inter_method (9 = auto, 10 = random)."""
    if code == 9:
        if new_w > old_w and new_h > old_h:
            return 2
        if new_w < old_w and new_h < old_h:
            return 3
        return 1
    if code == 10:
        return int(rng.randint(0, 5))
    return code


class _LazyRng(object):
    """A NumPy RandomState made on first use (making one costs more than decoding a
    small image, and deterministic pipelines never draw)."""
    __slots__ = ("seed", "rng")

    def __init__(self, seed):
        self.seed, self.rng = seed, None

    def __getattr__(self, name):
        if self.rng is None:
            self.rng = np.random.RandomState(self.seed)
        return getattr(self.rng, name)


class ImageRecordIter(_FileIter):
    """Images from a RecordIO file (``path_imgrec``, optional ``path_imgidx``), decoded with
    OpenCV by ``preprocess_threads`` threads while up to ``prefetch_buffer`` batches wait in
    a queue. Data is (batch,) + ``data_shape`` (C, H, W; RGB), label (batch,) or
    (batch, label_width).

    Per image, in MXNet's order: decode, ``resize`` (shorter side), optional affine
    augmentation (max_rotate_angle, rotate, max_shear_ratio, min/max_random_scale,
    max/min_aspect_ratio, min/max_img_size, fill_value), ``pad``, crop (random with
    ``rand_crop``, min/max_crop_size, else centred; images smaller than data_shape are
    scaled up first), brightness/contrast/saturation, random_h/s/l, pca_noise; then
    mirror (``rand_mirror``/``mirror``) and, for float32,
    ``(pixel - mean) * scale / std`` with mean_r/g/b/a or ``mean_img`` (a saved NDArray;
    computed over the data and saved when the file does not exist). ``dtype='uint8'``
    returns raw pixels, ``'int8'`` pixel - round(mean).

    Without random augmentation the numbers equal MXNet's. Random augmentation uses
    NumPy generators (seeded by ``seed`` or, per image, ``seed_aug``), so it is
    reproducible but not MXNet's random stream. ``shuffle`` reorders all records every
    epoch; ``num_parts``/``part_index`` take a contiguous share of the records."""

    def __init__(self, path_imgrec, data_shape, batch_size=1, path_imgidx="",
                 path_imglist="", label_width=1, shuffle=False, seed=0, round_batch=True,
                 resize=-1, rand_crop=False, rand_mirror=False, mirror=False, mean_img="",
                 mean_r=0.0, mean_g=0.0, mean_b=0.0, mean_a=0.0, std_r=1.0, std_g=1.0,
                 std_b=1.0, std_a=1.0, scale=1.0, max_random_contrast=0.0,
                 max_random_illumination=0.0, inter_method=1, pad=0, fill_value=255,
                 max_rotate_angle=0, rotate=-1, max_shear_ratio=0.0, max_random_scale=1.0,
                 min_random_scale=1.0, max_aspect_ratio=0.0, min_aspect_ratio=None,
                 max_img_size=1e10, min_img_size=0.0, min_crop_size=-1, max_crop_size=-1,
                 brightness=0.0, contrast=0.0, saturation=0.0, random_h=0, random_s=0,
                 random_l=0, pca_noise=0.0, random_resized_crop=False,
                 max_random_area=1.0, min_random_area=1.0, seed_aug=None, preprocess_threads=4,
                 prefetch_buffer=4, num_parts=1, part_index=0, dtype="float32",
                 data_name="data", label_name="softmax_label", verbose=True, **kwargs):
        super(ImageRecordIter, self).__init__(int(batch_size), data_name, label_name)
        from . import recordio
        self._cv2 = _cv2()
        self.path_imgrec = str(path_imgrec)
        shape = _shape_tuple(data_shape, "data_shape")
        if len(shape) != 3 or shape[0] not in (1, 3, 4):
            raise MXNetError("ImageRecordIter: invalid data_shape %s: need (channels, height, "
                             "width) with 1, 3 or 4 channels" % (shape,))
        self.data_shape = shape
        self.dtype = np.dtype(dtype or "float32")
        if self.dtype.name not in ("float32", "uint8", "int8"):
            raise ValueError("ImageRecordIter dtype must be float32, uint8 or int8, got %s"
                             % dtype)
        if self.batch_size <= 0:
            raise ValueError("batch_size must be positive")
        if inter_method not in (0, 1, 2, 3, 4, 9, 10):
            raise MXNetError("ImageRecordIter: invalid inter_method %s: valid values are "
                             "0, 1, 2, 3, 4, 9, 10" % inter_method)
        if not 0 <= int(part_index) < int(num_parts):
            raise ValueError("need 0 <= part_index < num_parts, got %s / %s"
                             % (part_index, num_parts))
        self.label_width = int(label_width)
        p = dict(resize=int(resize), rand_crop=bool(rand_crop), inter_method=int(inter_method),
                 pad=int(pad), fill_value=int(fill_value), max_rotate_angle=int(max_rotate_angle),
                 rotate=int(rotate), max_shear_ratio=float(max_shear_ratio),
                 max_random_scale=float(max_random_scale),
                 min_random_scale=float(min_random_scale), max_img_size=float(max_img_size),
                 min_img_size=float(min_img_size), min_crop_size=int(min_crop_size),
                 max_crop_size=int(max_crop_size), brightness=float(brightness),
                 contrast=float(contrast), saturation=float(saturation), random_h=int(random_h),
                 random_s=int(random_s), random_l=int(random_l), pca_noise=float(pca_noise),
                 rand_mirror=bool(rand_mirror), mirror=bool(mirror),
                 max_random_contrast=float(max_random_contrast),
                 max_random_illumination=float(max_random_illumination), scale=float(scale),
                 rrc=bool(random_resized_crop), max_random_area=float(max_random_area),
                 min_random_area=float(min_random_area))
        if p["rrc"] and (p["min_random_scale"] != 1 or p["max_random_scale"] != 1
                         or p["min_crop_size"] != -1 or p["max_crop_size"] != -1
                         or p["rand_crop"]):
            raise MXNetError("ImageRecordIter: random_resized_crop conflicts with "
                             "min_random_scale, max_random_scale, min_crop_size, "
                             "max_crop_size and rand_crop")
        if min_aspect_ratio is not None:
            p["aspect"] = (float(min_aspect_ratio), float(max_aspect_ratio))
        else:
            p["aspect"] = (1.0 - float(max_aspect_ratio), 1.0 + float(max_aspect_ratio))
        self._p = p
        c = shape[0]
        self._mean = np.array([mean_r, mean_g, mean_b, mean_a][:c] if c > 1 else [mean_r],
                              np.float32)
        self._std = np.array([std_r, std_g, std_b, std_a][:c] if c > 1 else [std_r],
                             np.float32)
        self._seed = int(seed)
        self._seed_aug = None if seed_aug is None else int(seed_aug)
        self._epoch = 0
        # the records: spans from the index (sorted offsets) or a scan of the file
        using_idx = bool(path_imgidx) and os.path.exists(path_imgidx)
        if using_idx:
            offsets = []
            with open(path_imgidx) as f:
                for lineno, line in enumerate(f, 1):
                    fields = line.split()
                    if not fields:
                        continue
                    try:
                        offsets.append(int(fields[1]))
                    except (IndexError, ValueError):
                        raise MXNetError("ImageRecordIter: %s:%d: bad index line %r"
                                         % (path_imgidx, lineno, line.rstrip())) from None
            try:
                size = os.path.getsize(self.path_imgrec)
            except OSError as e:
                raise MXNetError("ImageRecordIter: cannot open '%s': %s"
                                 % (self.path_imgrec, e.strerror or e)) from None
            offsets = sorted(set(offsets))
            if offsets and offsets[-1] >= size:
                raise MXNetError("ImageRecordIter: index '%s' points at offset %d beyond the "
                                 "end of '%s' (%d bytes)" % (path_imgidx, offsets[-1],
                                                            self.path_imgrec, size))
            spans = list(zip(offsets, offsets[1:] + [size]))
        else:
            spans = recordio._scan_spans(self.path_imgrec)
        # parts as dmlc-core splits them: by record count with an index, else by bytes
        # (a record belongs to the part its first byte falls in)
        num_parts, part_index = int(num_parts), int(part_index)
        if num_parts > 1 and using_idx:
            step = (len(spans) + num_parts - 1) // num_parts
            spans = spans[step * part_index:step * (part_index + 1)]
        elif num_parts > 1:
            size = spans[-1][1] if spans else 0
            step = (size + num_parts - 1) // num_parts
            step = (step + 3) // 4 * 4
            lo, hi = min(step * part_index, size), min(step * (part_index + 1), size)
            spans = [sp for sp in spans if lo <= sp[0] < hi]
        self._spans = spans
        self._ids = np.zeros(len(spans), np.uint64)  # image ids (header.id), as read
        if not self._spans:
            raise MXNetError("ImageRecordIter: '%s' has no records%s" % (
                self.path_imgrec, "" if num_parts == 1 else " in part %d of %d"
                % (part_index, num_parts)))
        if round_batch and len(self._spans) < self.batch_size:
            raise MXNetError("ImageRecordIter: '%s' has %d records, fewer than batch_size %d "
                             "(number of input images must be bigger than the batch size)"
                             % (self.path_imgrec, len(self._spans), self.batch_size))
        self._label_map = None
        if path_imglist:
            self._label_map = self._read_imglist(path_imglist)
        self._threads = max(1, int(preprocess_threads))
        self._prefetch = max(1, int(prefetch_buffer))
        self._fd = os.open(self.path_imgrec, os.O_RDONLY)
        self._pool = None
        self._meanimg = None
        if mean_img:
            self._meanimg = self._load_or_make_mean(str(mean_img), verbose)
        self._plan = _BatchPlan(len(self._spans), self.batch_size, bool(round_batch),
                                shuffle=bool(shuffle), seed=self._seed)
        self._start()

    # -- setup helpers
    def _read_imglist(self, path):
        labels = {}
        try:
            f = open(path)
        except OSError as e:
            raise MXNetError("ImageRecordIter: cannot open path_imglist '%s': %s"
                             % (path, e.strerror or e)) from None
        with f:
            for lineno, line in enumerate(f, 1):
                fields = line.strip().split("\t")
                if len(fields) < 2:
                    continue
                try:
                    vals = [float(x) for x in fields[1:1 + self.label_width]]
                    labels[int(float(fields[0]))] = np.array(vals, np.float32)
                except ValueError:
                    raise MXNetError("ImageRecordIter: %s:%d: bad line %r" %
                                     (path, lineno, line.rstrip())) from None
                if len(vals) != self.label_width:
                    raise MXNetError("ImageRecordIter: %s:%d has %d labels, label_width is %d"
                                     % (path, lineno, len(vals), self.label_width))
        return labels

    def _load_or_make_mean(self, path, verbose):
        nd = _nd()
        c, h, w = self.data_shape
        if os.path.exists(path):
            loaded = nd.load(path)
            arr = list(loaded.values())[0] if isinstance(loaded, dict) else loaded[0]
            arr = arr.asnumpy().astype(np.float32)
            if arr.shape != (c, h, w):
                raise MXNetError("ImageRecordIter: mean image '%s' has shape %s, data_shape is "
                                 "%s" % (path, arr.shape, self.data_shape))
            return arr
        # as MXNet: the float32 sum, in record order, of every image as the iterator would
        # output it without a mean image (mean_r/g/b, std, scale applied), times 1/count
        acc = None
        for i in range(len(self._spans)):
            if self.dtype == np.float32:
                img, _ = self._load_one(i, 0, out=np.empty((c, h, w), np.float32))
            else:
                img, _ = self._load_one(i, 0, normalize=False)
            if acc is None:
                acc = np.array(img, np.float32)
            else:
                acc += img
        mean = acc * (np.float32(1.0) / np.float32(len(self._spans)))
        nd.save(path, {"mean_img": nd.array(mean)})
        if verbose:
            import logging
            logging.info("ImageRecordIter: saved mean image of %d records to %s",
                         len(self._spans), path)
        return mean

    # -- per image
    def _rng(self, i, epoch):
        if self._seed_aug is not None:
            return _LazyRng((self._seed_aug + i) % (2 ** 32))
        return _LazyRng((self._seed * 1000003 + epoch * 7919 + i) % (2 ** 32))

    def _read_raw(self, i):
        from . import recordio
        start, end = self._spans[i]
        buf = os.pread(self._fd, end - start, start)
        rec = recordio._decode_span(buf, self.path_imgrec, start)
        if rec is None:
            raise MXNetError("ImageRecordIter: '%s': no record at offset %d"
                             % (self.path_imgrec, start))
        return rec

    def _load_one(self, i, epoch, normalize=True, out=None):
        """(C, H, W array, label vector) of record ``i`` (written into ``out`` if given);
        the record's image id is left in ``self._ids[i]``."""
        from . import recordio
        cv2 = self._cv2
        start = self._spans[i][0]
        header, payload = recordio.unpack(self._read_raw(i))
        self._ids[i] = header.id
        c = self.data_shape[0]
        flag = {1: 0, 3: 1, 4: -1}[c]
        img = None
        if payload:
            img = cv2.imdecode(np.frombuffer(payload, np.uint8), flag)
        if img is None:
            raise MXNetError("ImageRecordIter: '%s': cannot decode the image of record %d (id "
                             "%d, offset %d)" % (self.path_imgrec, i, header.id, start))
        if img.ndim == 2:
            img = img[:, :, None]
        if img.shape[2] != c:
            raise MXNetError("ImageRecordIter: '%s': record %d (id %d) has %d channels, "
                             "data_shape wants %d" % (self.path_imgrec, i, header.id,
                                                      img.shape[2], c))
        if self._label_map is not None:
            try:
                label = self._label_map[int(header.id)]
            except KeyError:
                raise MXNetError("ImageRecordIter: image id %d (record %d of '%s') is not in "
                                 "path_imglist" % (header.id, i, self.path_imgrec)) from None
        elif header.flag > 0:
            label = np.asarray(header.label, np.float32)
            if label.size != self.label_width:
                raise MXNetError("ImageRecordIter: '%s' record %d provides a %d-dimensional "
                                 "label but label_width is %d" % (self.path_imgrec, i,
                                                                  label.size, self.label_width))
        else:
            if self.label_width != 1:
                raise MXNetError("ImageRecordIter: label_width must be 1 unless an imglist is "
                                 "provided or the rec file is packed with multi-dimensional "
                                 "labels ('%s' record %d)" % (self.path_imgrec, i))
            label = np.array([header.label], np.float32)
        rng = self._rng(i, epoch)
        img = self._augment(img, rng)
        if img.ndim == 2:
            img = img[:, :, None]
        p = self._p
        mirrored = (p["rand_mirror"] and rng.rand() < 0.5) or p["mirror"]
        # strided views only: BGR(A) -> RGB(A), HWC -> CHW, mirror; the arithmetic below
        # reads them once and writes the batch slot directly
        if c == 3:
            img = img[:, :, ::-1]
        elif c == 4:
            img = img[:, :, [2, 1, 0, 3]]
        chw = img.transpose(2, 0, 1)
        if mirrored:
            chw = chw[:, :, ::-1]
        if not normalize:
            return chw.astype(np.float32), label
        if out is None:
            out = np.empty(self.data_shape, self.dtype)
        if self.dtype == np.uint8:
            out[...] = chw
            return out, label
        if self.dtype == np.int8:
            mean = (np.rint(self._meanimg) if self._meanimg is not None
                    else np.rint(self._mean).reshape(-1, 1, 1))
            if mirrored and self._meanimg is not None:
                mean = mean[:, :, ::-1]
            out[...] = np.clip(chw.astype(np.int16) - mean.astype(np.int16), -128, 127)
            return out, label
        contrast, illum = np.float32(p["scale"]), np.float32(0)
        if p["max_random_contrast"] or p["max_random_illumination"]:
            contrast = np.float32((rng.rand() * p["max_random_contrast"] * 2
                                   - p["max_random_contrast"] + 1) * p["scale"])
            illum = np.float32((rng.rand() * p["max_random_illumination"] * 2
                                - p["max_random_illumination"]) * p["scale"])
        mult = (contrast / self._std).astype(np.float32).reshape(-1, 1, 1)
        if self._meanimg is not None:
            mean = self._meanimg[:, :, ::-1] if mirrored else self._meanimg
        else:
            mean = self._mean.reshape(-1, 1, 1)
        # (pixel - mean) * (scale / std) [+ illumination / std], in float32 as MXNet
        np.subtract(chw, mean, out=out, dtype=np.float32)
        out *= mult
        if illum != 0:
            out += (illum / self._std).astype(np.float32).reshape(-1, 1, 1)
        return out, label

    def _augment(self, img, rng):
        cv2, p = self._cv2, self._p
        _, h_out, w_out = self.data_shape
        if p["resize"] > 0:
            rows, cols = img.shape[:2]
            if rows > cols:
                nh, nw = p["resize"] * rows // cols, p["resize"]
            else:
                nh, nw = p["resize"], p["resize"] * cols // rows
            img = cv2.resize(img, (nw, nh), interpolation=_inter_method(
                p["inter_method"], cols, rows, nw, nh, rng))
        lo_ar, hi_ar = p["aspect"]
        if (p["max_rotate_angle"] > 0 or p["max_shear_ratio"] > 0 or p["rotate"] > 0
                or p["max_random_scale"] != 1 or p["min_random_scale"] != 1
                or (not p["rrc"] and (lo_ar != 1 or hi_ar != 1)) or p["max_img_size"] != 1e10
                or p["min_img_size"] != 0):
            f32 = np.float32
            s = f32(rng.rand() * p["max_shear_ratio"] * 2 - p["max_shear_ratio"])
            angle = rng.randint(-p["max_rotate_angle"], p["max_rotate_angle"] + 1)
            if p["rotate"] > 0:
                angle = p["rotate"]
            a, b = f32(np.cos(angle / 180.0 * np.pi)), f32(np.sin(angle / 180.0 * np.pi))
            scale = ratio = f32(1)
            if not p["rrc"]:
                scale = f32(rng.rand() * (p["max_random_scale"] - p["min_random_scale"])
                            + p["min_random_scale"])
                ratio = f32(rng.rand() * (hi_ar - lo_ar) + lo_ar)
            hs = f32(2 * scale / (1 + ratio))
            ws = ratio * hs
            rows, cols = img.shape[:2]
            new_w = int(max(p["min_img_size"], min(p["max_img_size"], scale * cols)))
            new_h = int(max(p["min_img_size"], min(p["max_img_size"], scale * rows)))
            m = np.zeros((2, 3), np.float32)
            m[0, 0] = hs * a - s * b * ws
            m[1, 0] = -b * ws
            m[0, 1] = hs * b + s * a * ws
            m[1, 1] = a * ws
            cw = m[0, 0] * cols + m[0, 1] * rows
            ch = m[1, 0] * cols + m[1, 1] * rows
            m[0, 2] = (new_w - cw) / 2
            m[1, 2] = (new_h - ch) / 2
            interp = _inter_method(p["inter_method"] if p["inter_method"] else 1, cols, rows,
                                   new_w, new_h, rng)
            fv = p["fill_value"]
            img = cv2.warpAffine(img, m, (new_w, new_h), flags=interp,
                                 borderMode=cv2.BORDER_CONSTANT, borderValue=(fv, fv, fv, fv))
        if p["pad"] > 0:
            fv, q = p["fill_value"], p["pad"]
            img = cv2.copyMakeBorder(img, q, q, q, q, cv2.BORDER_CONSTANT,
                                     value=(fv, fv, fv, fv))
        if img.ndim == 2:
            img = img[:, :, None]
        cropped = False
        if p["rrc"]:
            if (p["max_random_area"] != 1 or p["min_random_area"] != 1 or lo_ar != 1
                    or hi_ar != 1):
                if not (lo_ar > 0 and p["min_random_area"] <= p["max_random_area"]
                        and lo_ar <= hi_ar):
                    raise MXNetError("ImageRecordIter: random_resized_crop needs "
                                     "0 < min_aspect_ratio <= max_aspect_ratio and "
                                     "min_random_area <= max_random_area")
                rows, cols = img.shape[:2]
                for _ in range(10):
                    target = rows * cols * rng.uniform(p["min_random_area"],
                                                       p["max_random_area"])
                    ratio = rng.uniform(lo_ar, hi_ar)
                    ya = int(round(np.sqrt(target / ratio)))
                    xa = int(round(np.sqrt(target * ratio)))
                    if rng.rand() > 0.5:
                        ya, xa = xa, ya
                    if 0 < ya <= rows and 0 < xa <= cols:
                        y = rng.randint(0, rows - ya + 1)
                        x = rng.randint(0, cols - xa + 1)
                        img = cv2.resize(img[y:y + ya, x:x + xa], (w_out, h_out),
                                         interpolation=_inter_method(
                                             p["inter_method"], xa, ya, w_out, h_out, rng))
                        cropped = True
                        break
        elif p["max_crop_size"] != -1 or p["min_crop_size"] != -1:
            rows, cols = img.shape[:2]
            lo, hi = p["min_crop_size"], p["max_crop_size"]
            if not (cols >= hi and rows >= hi and hi >= lo):
                raise MXNetError("ImageRecordIter: input image size %dx%d smaller than "
                                 "max_crop_size %d" % (cols, rows, hi))
            size = rng.randint(lo, hi + 1)
            y, x = rows - size, cols - size
            if p["rand_crop"]:
                y, x = rng.randint(0, y + 1), rng.randint(0, x + 1)
            else:
                y, x = y // 2, x // 2
            img = cv2.resize(img[y:y + size, x:x + size], (w_out, h_out),
                             interpolation=_inter_method(p["inter_method"], size, size,
                                                         w_out, h_out, rng))
            cropped = True
        if not cropped:
            rows, cols = img.shape[:2]
            interp = _inter_method(p["inter_method"], cols, rows, w_out, h_out, rng)
            if rows < h_out:
                new_cols = int(np.float32(h_out) / np.float32(rows) * np.float32(cols))
                img = cv2.resize(img, (new_cols, h_out), interpolation=interp)
                rows, cols = img.shape[:2]
            if cols < w_out:
                new_rows = int(np.float32(w_out) / np.float32(cols) * np.float32(rows))
                img = cv2.resize(img, (w_out, new_rows), interpolation=interp)
                rows, cols = img.shape[:2]
            if rows < h_out or cols < w_out:
                raise MXNetError("ImageRecordIter: input image size %dx%d smaller than input "
                                 "shape %dx%d" % (cols, rows, w_out, h_out))
            y, x = rows - h_out, cols - w_out
            if p["rand_crop"]:
                y, x = rng.randint(0, y + 1), rng.randint(0, x + 1)
            else:
                y, x = y // 2, x // 2
            img = img[y:y + h_out, x:x + w_out]
        if img.ndim == 2:
            img = img[:, :, None]
        if p["brightness"] > 0 or p["contrast"] > 0 or p["saturation"] > 0:
            img = self._color_jitter(img, rng)
        if p["random_h"] or p["random_s"] or p["random_l"]:
            if img.shape[2] == 3:
                hls = cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_BGR2HLS).astype(np.int32)
                r = [(rng.rand() + 4 * rng.rand()) / 5 for _ in range(3)]
                dh = int(r[0] * p["random_h"] * 2 - p["random_h"])
                ds = int(r[1] * p["random_s"] * 2 - p["random_s"])
                dl = int(r[2] * p["random_l"] * 2 - p["random_l"])
                hls += np.array([dh, dl, ds], np.int32)
                hls = np.clip(hls, 0, np.array([180, 255, 255])).astype(np.uint8)
                img = cv2.cvtColor(hls, cv2.COLOR_HLS2BGR)
        if p["pca_noise"] > 0 and img.shape[2] == 3:
            eig = np.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                            [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                            [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]], np.float32)
            alpha = rng.normal(0, p["pca_noise"], 3).astype(np.float32)
            rgb = eig.dot(alpha)
            img = np.clip(img.astype(np.int32) + rgb[::-1].astype(np.int32), 0, 255).astype(
                np.uint8)
        return img

    def _color_jitter(self, img, rng):
        cv2, p = self._cv2, self._p
        ab = 1.0 + rng.uniform(-p["brightness"], p["brightness"])
        ac = 1.0 + rng.uniform(-p["contrast"], p["contrast"])
        asat = 1.0 + rng.uniform(-p["saturation"], p["saturation"])
        out = img.astype(np.float32)
        for k in rng.permutation(3):
            if k == 0:
                out = out * ab
            elif img.shape[2] == 3:
                gray = cv2.cvtColor(np.clip(out, 0, 255).astype(np.uint8), cv2.COLOR_BGR2GRAY)
                if k == 1:
                    out = out * ac + (1 - ac) * gray.mean()
                else:
                    out = out * asat + (1 - asat) * gray[:, :, None].astype(np.float32)
            out = np.clip(np.rint(out), 0, 255)
        return out.astype(np.uint8)

    # -- batches
    def _get_pool(self):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="loom-imgrec")
        return self._pool

    def _make_batch(self, ids, pad, epoch):
        bs = self.batch_size
        real_n = int(np.count_nonzero(np.asarray(ids) >= 0))
        data = (np.empty if real_n == bs else np.zeros)((bs,) + self.data_shape, self.dtype)
        lshape = (bs,) if self.label_width == 1 else (bs, self.label_width)
        label = np.zeros(lshape, np.float32)
        real = [int(i) for i in ids if i >= 0]

        def work(chunk):
            for j, i in chunk:
                _, lab = self._load_one(i, epoch, out=data[j])
                label[j] = lab if self.label_width != 1 else lab[0]
        items = list(enumerate(real))
        n = min(self._threads, len(items))
        chunks = [items[k::n] for k in range(n)]
        if n <= 1:
            work(items)
        else:
            for f in [self._get_pool().submit(work, ch) for ch in chunks]:
                f.result()
        if len(real) < bs and self._last is not None:
            # as MXNet without round_batch: the padded slots keep the previous batch
            data[len(real):] = self._last[0][len(real):]
            label[len(real):] = self._last[1][len(real):]
        # MXNet's batch index holds the image ids of the records
        index = np.zeros(bs, np.uint64)
        index[:len(real)] = self._ids[real]
        self._last = (data, label)
        return data, label, pad, index

    def _produce(self, plan):
        epoch = self._epoch
        self._epoch += 1
        self._last = None
        q = queue.Queue(maxsize=self._prefetch)
        stop = threading.Event()

        wself = weakref.ref(self)  # an abandoned iterator must stay collectable

        def producer():
            try:
                for ids, pad in plan:
                    owner = wself()
                    if stop.is_set() or owner is None:
                        return
                    item = owner._make_batch(ids, pad, epoch)
                    del owner
                    while not stop.is_set():
                        try:
                            q.put(item, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                q.put(None)
            except BaseException as e:  # handed to the consumer
                q.put(e)

        t = threading.Thread(target=producer, daemon=True, name="loom-imgrec-batches")
        t.start()
        try:
            while True:
                item = q.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while t.is_alive():
                try:
                    q.get(timeout=0.05)
                except queue.Empty:
                    pass
            t.join()

    def close(self):
        """Stops the background threads and closes the file."""
        self._stop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def ImageRecordUInt8Iter(*args, **kwargs):
    """ImageRecordIter with dtype uint8 (deprecated in MXNet)."""
    kwargs["dtype"] = "uint8"
    return ImageRecordIter(*args, **kwargs)


def ImageRecordInt8Iter(*args, **kwargs):
    """ImageRecordIter with dtype int8 (deprecated in MXNet)."""
    kwargs["dtype"] = "int8"
    return ImageRecordIter(*args, **kwargs)
