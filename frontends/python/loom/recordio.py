"""RecordIO files (``mx.recordio``), byte-compatible with MXNet / dmlc-core.

File format (little endian). Every record is written as one or more parts; each part is

    uint32 magic (0xced7230a) | uint32 lrec | payload | zero padding to a multiple of 4

where ``lrec = cflag << 29 | payload_length``. A record whose payload contains the magic
word at a 4-byte aligned position is split there (the magic itself is dropped and put back
on reading): cflag 0 = whole record, 1 = first part, 2 = middle part, 3 = last part.

An index file (``.idx``) has one ``key<TAB>byte offset`` line per record.

Image records start with an ``IRHeader`` (struct ``IfQQ``: flag, label, id, id2). When
``flag > 0`` the header's label is unused and ``flag`` float32 labels follow the header.
"""
import numbers
import os
import struct
from collections import namedtuple

import numpy as np

from .base import MXNetError

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img", "RecordIOError"]

_MAGIC = 0xced7230a
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_LEN_MASK = (1 << 29) - 1


class RecordIOError(MXNetError):
    """A RecordIO file is missing, truncated or corrupt."""


def _aligned(n):
    return (n + 3) & ~3


def _encode_parts(buf):
    """The bytes one record occupies in a .rec file."""
    n = len(buf)
    if n > _LEN_MASK:
        raise ValueError("RecordIO record of %d bytes is too large (limit %d)" % (n, _LEN_MASK))
    out = []
    start = 0
    # split at every 4-byte aligned occurrence of the magic word
    pos = buf.find(_MAGIC_BYTES, 0)
    while pos != -1 and pos + 4 <= n:
        if pos % 4 == 0:
            cflag = 1 if start == 0 else 2
            out.append(struct.pack("<II", _MAGIC, (cflag << 29) | (pos - start)))
            out.append(buf[start:pos])
            start = pos + 4
            pos = buf.find(_MAGIC_BYTES, start)
        else:
            pos = buf.find(_MAGIC_BYTES, pos + 1)
    cflag = 3 if start != 0 else 0
    out.append(struct.pack("<II", _MAGIC, (cflag << 29) | (n - start)))
    out.append(buf[start:])
    out.append(b"\0" * (_aligned(n) - n))
    return b"".join(out)


def _read_record(f, path):
    """Reads one record at the file's position; None at a clean end of file."""
    parts = []
    while True:
        offset = f.tell()
        head = f.read(8)
        if not head:
            if parts:
                raise RecordIOError("%s: truncated record at offset %d (multi-part record "
                                    "has no last part)" % (path, offset))
            return None
        if len(head) < 8:
            raise RecordIOError("%s: truncated record header at offset %d (%d of 8 bytes)"
                                % (path, offset, len(head)))
        magic, lrec = struct.unpack("<II", head)
        if magic != _MAGIC:
            raise RecordIOError("%s: invalid RecordIO magic 0x%08x at offset %d (expected "
                                "0x%08x); not a RecordIO file or a wrong index offset"
                                % (path, magic, offset, _MAGIC))
        cflag, length = lrec >> 29, lrec & _LEN_MASK
        body = f.read(_aligned(length))
        if len(body) < length:
            raise RecordIOError("%s: truncated record at offset %d: header says %d bytes, "
                                "file has %d" % (path, offset, length, len(body)))
        if cflag not in (0, 1, 2, 3) or (cflag in (0, 1)) == bool(parts):
            raise RecordIOError("%s: corrupt record part (cflag %d) at offset %d"
                                % (path, cflag, offset))
        parts.append(body[:length])
        if cflag in (0, 3):
            return _MAGIC_BYTES.join(parts)


def _to_bytes(buf):
    if isinstance(buf, str):
        return buf.encode("utf-8")
    return bytes(buf)


class MXRecordIO(object):
    """Sequential RecordIO reader/writer.

    ``uri``: file path; ``flag``: ``'r'`` to read, ``'w'`` to write (truncates). ``read()``
    returns the next record as bytes, or None at the end; ``write(buf)`` appends one."""

    def __init__(self, uri, flag):
        self.uri = str(uri)
        self.flag = flag
        self.handle = None
        self.is_open = False
        self.open()

    def open(self):
        if self.flag == "w":
            mode, self.writable = "wb", True
        elif self.flag == "r":
            mode, self.writable = "rb", False
        else:
            raise ValueError("Invalid flag %r: must be 'r' or 'w'" % (self.flag,))
        try:
            self.handle = open(self.uri, mode)
        except OSError as e:
            raise RecordIOError("cannot open RecordIO file '%s' for %s: %s"
                                % (self.uri, "writing" if self.writable else "reading",
                                   e.strerror or e)) from e
        self.pid = os.getpid()
        self.is_open = True

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __getstate__(self):
        """Pickles the path and mode only. As in MXNet, pickling closes this object (a
        writer is flushed; reopening it would truncate the file) and the copy is opened
        afresh (a reader at the start)."""
        is_open = self.is_open
        self.close()
        d = dict(self.__dict__)
        d["is_open"] = is_open
        d["handle"] = None
        return d

    def __setstate__(self, d):
        self.__dict__ = d
        is_open = d["is_open"]
        self.is_open = False
        self.handle = None
        if is_open:
            self.open()

    def _check_pid(self, allow_reset=False):
        """A forked child reopens its own handle (readers only)."""
        if self.pid != os.getpid():
            if allow_reset:
                self.reset()
            else:
                raise RuntimeError("Forbidden operation in multiple processes")

    def close(self):
        if not getattr(self, "is_open", False):
            return
        if self.handle is not None:
            self.handle.close()
        self.handle = None
        self.is_open = False
        self.pid = None

    def reset(self):
        """Back to the start (a writer starts the file over)."""
        self.close()
        self.open()

    def _require_open(self):
        if not self.is_open:
            raise RecordIOError("RecordIO file '%s' is closed" % self.uri)

    def write(self, buf):
        self._require_open()
        if not self.writable:
            raise RecordIOError("RecordIO file '%s' was opened for reading" % self.uri)
        self._check_pid(allow_reset=False)
        self.handle.write(_encode_parts(_to_bytes(buf)))

    def read(self):
        self._require_open()
        if self.writable:
            raise RecordIOError("RecordIO file '%s' was opened for writing" % self.uri)
        self._check_pid(allow_reset=True)
        return _read_record(self.handle, self.uri)

    def tell(self):
        self._require_open()
        return self.handle.tell()


class MXIndexedRecordIO(MXRecordIO):
    """RecordIO with random access through an index file (``idx_path``): ``read_idx(key)``,
    ``write_idx(key, buf)``, ``keys``; keys are converted with ``key_type``."""

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = str(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self.fidx = None
        super(MXIndexedRecordIO, self).__init__(uri, flag)

    def open(self):
        super(MXIndexedRecordIO, self).open()
        self.idx = {}
        self.keys = []
        try:
            self.fidx = open(self.idx_path, "w" if self.writable else "r")
        except OSError as e:
            super(MXIndexedRecordIO, self).close()
            raise RecordIOError("cannot open RecordIO index '%s': %s"
                                % (self.idx_path, e.strerror or e)) from e
        if not self.writable:
            for lineno, line in enumerate(iter(self.fidx.readline, ""), 1):
                fields = line.strip().split("\t")
                if not fields or fields == [""]:
                    continue
                try:
                    key, pos = self.key_type(fields[0]), int(fields[1])
                except (ValueError, IndexError) as e:
                    raise RecordIOError("%s:%d: bad index line %r (want 'key<TAB>offset')"
                                        % (self.idx_path, lineno, line.rstrip("\n"))) from e
                self.idx[key] = pos
                self.keys.append(key)

    def close(self):
        if not getattr(self, "is_open", False):
            return
        super(MXIndexedRecordIO, self).close()
        if self.fidx is not None:
            self.fidx.close()
        self.fidx = None

    def __getstate__(self):
        d = super(MXIndexedRecordIO, self).__getstate__()
        d["fidx"] = None
        return d

    def seek(self, idx):
        """Positions the reader at the record with key ``idx``."""
        self._require_open()
        if self.writable:
            raise RecordIOError("RecordIO file '%s' was opened for writing" % self.uri)
        self._check_pid(allow_reset=True)
        try:
            pos = self.idx[idx]
        except KeyError:
            raise KeyError("key %r is not in index '%s'" % (idx, self.idx_path)) from None
        self.handle.seek(pos)

    def read_idx(self, idx):
        self.seek(idx)
        return self.read()

    def write_idx(self, idx, buf):
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        self.fidx.write("%s\t%d\n" % (str(key), pos))
        self.idx[key] = pos
        self.keys.append(key)


IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """Image record header: flag (number of float labels after the header, 0
for a single label held in ``label``), label, id, id2."""
_IR_FORMAT = "IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def pack(header, s):
    """Header + payload bytes. An array-like ``header.label`` is stored after the header
    as float32 (``flag`` = its length)."""
    header = IRHeader(*header)
    s = _to_bytes(s)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32).ravel()
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + s
    return struct.pack(_IR_FORMAT, *header) + s


def unpack(s):
    """(IRHeader, payload bytes). With ``flag > 0`` the header's label is a float32 array."""
    s = bytes(s)
    if len(s) < _IR_SIZE:
        raise RecordIOError("image record of %d bytes is shorter than its %d-byte header"
                            % (len(s), _IR_SIZE))
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise RecordIOError("image record header says %d labels but only %d bytes follow"
                                % (header.flag, len(s)))
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag).copy())
        s = s[header.flag * 4:]
    return header, s


def _cv2():
    try:
        import cv2
    except ImportError as e:
        raise ImportError("mx.recordio.pack_img/unpack_img need OpenCV: pip install "
                          "opencv-python-headless") from e
    return cv2


def unpack_img(s, iscolor=-1):
    """(IRHeader, image as a numpy array in OpenCV's BGR order)."""
    cv2 = _cv2()
    header, s = unpack(s)
    img = cv2.imdecode(np.frombuffer(s, dtype=np.uint8), iscolor)
    if img is None:
        raise RecordIOError("cannot decode the image in record id %d" % header.id)
    return header, img


def pack_img(header, img, quality=95, img_fmt=".jpg"):
    """Encodes ``img`` (numpy, BGR) with OpenCV and packs it: ``quality`` is the JPEG
    quality or the PNG compression level."""
    cv2 = _cv2()
    fmt = img_fmt.lower()
    if fmt in (".jpg", ".jpeg"):
        params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    elif fmt == ".png":
        params = [cv2.IMWRITE_PNG_COMPRESSION, quality]
    else:
        params = []
    if hasattr(img, "asnumpy"):
        img = img.asnumpy()
    ok, buf = cv2.imencode(img_fmt, np.asarray(img), params)
    if not ok:
        raise ValueError("failed to encode image as %s" % img_fmt)
    return pack(header, buf.tobytes())


def _scan_spans(path):
    """(start, end) byte spans of every record in a .rec file, read from the part headers
    only; errors name the file and offset."""
    spans = []
    try:
        f = open(path, "rb")
    except OSError as e:
        raise RecordIOError("cannot open RecordIO file '%s': %s" % (path, e.strerror or e))
    with f:
        size = os.fstat(f.fileno()).st_size
        pos, start, in_record = 0, 0, False
        while pos < size:
            f.seek(pos)
            head = f.read(8)
            if len(head) < 8:
                raise RecordIOError("%s: truncated record header at offset %d" % (path, pos))
            magic, lrec = struct.unpack("<II", head)
            if magic != _MAGIC:
                raise RecordIOError("%s: invalid RecordIO magic 0x%08x at offset %d (expected "
                                    "0x%08x)" % (path, magic, pos, _MAGIC))
            cflag, length = lrec >> 29, lrec & _LEN_MASK
            if not in_record:
                start = pos
            end = pos + 8 + _aligned(length)
            if pos + 8 + length > size:
                raise RecordIOError("%s: truncated record at offset %d: header says %d bytes, "
                                    "file has %d" % (path, pos, length, size - pos - 8))
            in_record = cflag in (1, 2)
            if not in_record:
                spans.append((start, end))
            pos = end
        if in_record:
            raise RecordIOError("%s: truncated multi-part record at offset %d" % (path, start))
    return spans


def _decode_span(buf, path, offset):
    """The record held in ``buf`` (the bytes of one span read at ``offset``)."""
    import io as _io
    return _read_record(_io.BytesIO(buf), "%s (record at offset %d)" % (path, offset))
