"""mx.io file iterators, mx.recordio and mx.image. References are computed independently in
the tests (struct-packed bytes for the RecordIO format, NumPy slicing/arithmetic and direct
OpenCV calls for images); fixtures are generated into tmp dirs."""
import gzip
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

import loom as mx

cv2 = pytest.importorskip("cv2")

MAGIC = 0xced7230a


def _ref_record(payload, cflag=0):
    """One RecordIO part as the format defines it."""
    pad = (4 - len(payload) % 4) % 4
    return struct.pack("<II", MAGIC, (cflag << 29) | len(payload)) + payload + b"\0" * pad


# ----------------------------------------------------------------------------- recordio

def test_recordio_bytes_match_format(tmp_path):
    p = str(tmp_path / "a.rec")
    w = mx.recordio.MXRecordIO(p, "w")
    m = struct.pack("<I", MAGIC)
    recs = [b"", b"a", b"abcd", b"hello world", b"xy" + m + b"z", b"abcd" + m + b"ef"]
    for r in recs:
        w.write(r)
    w.close()
    want = b"".join(_ref_record(r) for r in recs[:5])
    # the aligned magic inside the last record splits it into a first and a last part
    want += _ref_record(b"abcd", 1) + _ref_record(b"ef", 3)
    with open(p, "rb") as f:
        assert f.read() == want
    r = mx.recordio.MXRecordIO(p, "r")
    assert [r.read() for _ in recs] == recs
    assert r.read() is None
    r.reset()
    assert r.read() == recs[0]
    r.close()


def test_indexed_recordio_random_access_and_pickle(tmp_path):
    rec, idx = str(tmp_path / "b.rec"), str(tmp_path / "b.idx")
    rng = np.random.RandomState(1)
    data = {k: rng.bytes(rng.randint(0, 40)) for k in range(30)}
    w = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for k, v in data.items():
        w.write_idx(k, v)
    w.close()
    offsets = [int(line.split("\t")[1]) for line in open(idx)]
    assert offsets == sorted(offsets) and offsets[0] == 0
    r = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    assert r.keys == list(range(30))
    for k in reversed(range(30)):
        assert r.read_idx(k) == data[k]
    r2 = pickle.loads(pickle.dumps(r))  # closes r, as MXNet
    assert r2.read_idx(7) == data[7] and not r.is_open
    r2.close()
    w = mx.recordio.MXRecordIO(str(tmp_path / "c.rec"), "w")
    w.write(b"kept")
    w2 = pickle.loads(pickle.dumps(w))  # a writer's copy starts the file over
    w2.write(b"new")
    w2.close()
    rd = mx.recordio.MXRecordIO(str(tmp_path / "c.rec"), "r")
    assert rd.read() == b"new" and rd.read() is None


def test_pack_unpack_labels():
    h = mx.recordio.IRHeader(0, 2.5, 9, 3)
    s = mx.recordio.pack(h, b"payload")
    assert s == struct.pack("IfQQ", 0, 2.5, 9, 3) + b"payload"
    h2, p = mx.recordio.unpack(s)
    assert (h2.flag, h2.label, h2.id, h2.id2, p) == (0, 2.5, 9, 3, b"payload")
    s = mx.recordio.pack(mx.recordio.IRHeader(0, [1, 2, 3.5], 4, 0), b"x")
    assert s == struct.pack("IfQQ", 3, 0, 4, 0) + np.float32([1, 2, 3.5]).tobytes() + b"x"
    h3, p = mx.recordio.unpack(s)
    assert h3.flag == 3 and list(h3.label) == [1, 2, 3.5] and p == b"x"


def test_pack_img_roundtrip():
    img = np.random.RandomState(0).randint(0, 256, (7, 9, 3)).astype(np.uint8)
    s = mx.recordio.pack_img(mx.recordio.IRHeader(0, 1, 2, 0), img, quality=3, img_fmt=".png")
    h, out = mx.recordio.unpack_img(s)
    assert h.label == 1 and np.array_equal(out, img)


def test_recordio_errors(tmp_path):
    with pytest.raises(mx.base.MXNetError, match="nope.rec"):
        mx.recordio.MXRecordIO(str(tmp_path / "nope.rec"), "r")
    p = str(tmp_path / "bad.rec")
    with open(p, "wb") as f:
        f.write(_ref_record(b"good") + struct.pack("<II", 0x12345678, 4) + b"abcd")
    r = mx.recordio.MXRecordIO(p, "r")
    assert r.read() == b"good"
    with pytest.raises(mx.base.MXNetError, match=r"bad.rec.*magic.*offset 12"):
        r.read()
    with open(p, "wb") as f:
        f.write(_ref_record(b"good") + _ref_record(b"0123456789")[:13])
    r = mx.recordio.MXRecordIO(p, "r")
    r.read()
    with pytest.raises(mx.base.MXNetError, match=r"truncated record at offset 12"):
        r.read()
    with pytest.raises(ValueError):
        mx.recordio.MXRecordIO(p, "x")


# ----------------------------------------------------------------------------- iterators

def _csv(path, arr, fmt="%d"):
    np.savetxt(path, arr.reshape(len(arr), -1), delimiter=",", fmt=fmt)


def _round_batch_reference(n, bs, epochs):
    """Sample ids per batch with MXNet's round_batch: the last batch wraps to the start and
    the next epoch continues after the wrapped samples."""
    out, start = [], 0
    for _ in range(epochs):
        pos, ep = start, []
        start = 0
        while pos < n:
            ids = [(pos + k) % n for k in range(bs)]
            pad = max(0, pos + bs - n)
            if pad:
                start = pad
            ep.append((ids, pad))
            pos += bs
        out.append(ep)
    return out


def test_csviter_round_batch_and_pad(tmp_path):
    data = np.arange(7 * 6).reshape(7, 6)
    _csv(str(tmp_path / "d.csv"), data)
    _csv(str(tmp_path / "l.csv"), np.arange(7) * 10)
    it = mx.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(2, 3),
                       label_csv=str(tmp_path / "l.csv"), batch_size=3)
    assert it.provide_data[0].shape == (3, 2, 3)
    assert it.provide_label[0].shape == (3,)
    for ep in _round_batch_reference(7, 3, 3):
        got = [(b.data[0].asnumpy(), b.label[0].asnumpy(), b.pad) for b in it]
        assert len(got) == len(ep)
        for (d, l, pad), (ids, want_pad) in zip(got, ep):
            np.testing.assert_array_equal(d, data[ids].reshape(3, 2, 3))
            np.testing.assert_array_equal(l, np.array(ids) * 10)
            assert pad == want_pad
        it.reset()
    it = mx.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(6,), batch_size=3,
                       round_batch=False)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 2]
    np.testing.assert_array_equal(batches[2].data[0].asnumpy()[0], data[6])
    np.testing.assert_array_equal(batches[2].label[0].asnumpy(), np.zeros(3))


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
def test_csviter_dtype(tmp_path, dtype):
    val = {"int32": 200000001, "int64": 2147483648, "float32": 1.5}[dtype]
    rows = np.full((10, 4), val, dtype=dtype)
    _csv(str(tmp_path / "d.csv"), rows, fmt="%g" if dtype == "float32" else "%d")
    it = mx.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(2, 2), batch_size=5,
                       dtype=dtype)
    for b in it:
        a = it.getdata().asnumpy()
        assert a.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a, rows[:5].reshape(5, 2, 2))


def test_csviter_errors(tmp_path):
    with open(tmp_path / "d.csv", "w") as f:
        f.write("1,2,3\n4,5\n")
    with pytest.raises(mx.base.MXNetError, match=r"d.csv:2 has 2 values"):
        mx.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(3,), batch_size=1)
    with pytest.raises(mx.base.MXNetError, match="missing.csv"):
        mx.io.CSVIter(data_csv=str(tmp_path / "missing.csv"), data_shape=(3,))


def _write_mnist(tmp_path, n, gz):
    rng = np.random.RandomState(3)
    imgs = rng.randint(0, 256, (n, 28, 28)).astype(np.uint8)
    labs = rng.randint(0, 10, n).astype(np.uint8)
    op = gzip.open if gz else open
    ip, lp = str(tmp_path / "img"), str(tmp_path / "lab")
    with op(ip, "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + imgs.tobytes())
    with op(lp, "wb") as f:
        f.write(struct.pack(">II", 2049, n) + labs.tobytes())
    return ip, lp, imgs, labs


@pytest.mark.parametrize("gz", [False, True])
def test_mnistiter(tmp_path, gz):
    ip, lp, imgs, labs = _write_mnist(tmp_path, 10, gz)
    it = mx.io.MNISTIter(image=ip, label=lp, batch_size=4, shuffle=False, silent=True)
    assert it.provide_data[0].shape == (4, 1, 28, 28)
    batches = list(it)
    assert len(batches) == 2  # only full batches, as MXNet
    for k, b in enumerate(batches):
        want = imgs[4 * k:4 * k + 4].astype(np.float32)[:, None] / np.float32(256)
        np.testing.assert_array_equal(b.data[0].asnumpy(), want)
        np.testing.assert_array_equal(b.label[0].asnumpy(), labs[4 * k:4 * k + 4])
    it = mx.io.MNISTIter(image=ip, label=lp, batch_size=2, shuffle=False, flat=True,
                         num_parts=3, part_index=1, silent=True)
    b = it.next()
    assert b.data[0].shape == (2, 784)
    np.testing.assert_array_equal(b.label[0].asnumpy(), labs[3:5])
    it = mx.io.MNISTIter(image=ip, label=lp, batch_size=5, shuffle=True, seed=1, silent=True)
    got = np.concatenate([b.label[0].asnumpy() for b in it])
    assert sorted(got) == sorted(labs.astype(np.float32))


def test_mnist_bad_file(tmp_path):
    ip, lp, _, _ = _write_mnist(tmp_path, 4, False)
    with pytest.raises(mx.base.MXNetError, match="magic"):
        mx.io.MNISTIter(image=ip, label=ip, batch_size=2, silent=True)
    with open(ip, "r+b") as f:
        f.truncate(100)
    with pytest.raises(mx.base.MXNetError, match="truncated"):
        mx.io.MNISTIter(image=ip, label=lp, batch_size=2, silent=True)


def test_prefetching_iter():
    a = np.arange(40, dtype=np.float32).reshape(20, 2)
    b = -np.arange(20, dtype=np.float32)
    it1 = mx.io.NDArrayIter(a, b, batch_size=5)
    it2 = mx.io.NDArrayIter({"x": a * 2}, batch_size=5)
    p = mx.io.PrefetchingIter([it1, it2], rename_data=[{"data": "d1"}, {"x": "d2"}])
    assert [d.name for d in p.provide_data] == ["d1", "d2"]
    assert p.batch_size == 5
    for _ in range(2):
        got = list(p)
        assert len(got) == 4
        for k, batch in enumerate(got):
            np.testing.assert_array_equal(batch.data[0].asnumpy(), a[5 * k:5 * k + 5])
            np.testing.assert_array_equal(batch.data[1].asnumpy(), 2 * a[5 * k:5 * k + 5])
            np.testing.assert_array_equal(batch.label[0].asnumpy(), b[5 * k:5 * k + 5])
        p.reset()
    p.close()


# ----------------------------------------------------------------------------- images

def _images(n, seed=0):
    rng = np.random.RandomState(seed)
    sizes = [(40, 50), (50, 40), (32, 32), (20, 30), (64, 48), (33, 47)]
    out = []
    for i in range(n):
        h, w = sizes[i % len(sizes)]
        out.append(cv2.GaussianBlur(rng.randint(0, 256, (h, w, 3)).astype(np.uint8), (5, 5), 0))
    return out


def _write_rec(tmp_path, imgs, labels=None, idx=True):
    rec, ix = str(tmp_path / "im.rec"), str(tmp_path / "im.idx")
    w = (mx.recordio.MXIndexedRecordIO(ix, rec, "w") if idx else mx.recordio.MXRecordIO(rec, "w"))
    for i, img in enumerate(imgs):
        lab = float(i % 5) if labels is None else labels[i]
        s = mx.recordio.pack_img(mx.recordio.IRHeader(0, lab, i, 0), img, quality=3,
                                 img_fmt=".png")
        w.write_idx(i, s) if idx else w.write(s)
    w.close()
    return rec, ix


def _ref_image(img, shape, resize=-1, mean=(0, 0, 0), std=(1, 1, 1), scale=1.0, mirror=False):
    """ImageRecordIter's deterministic path: shorter side to ``resize``, scale up if smaller
    than the crop, centre crop, BGR->RGB, CHW, (x - mean) * (scale / std)."""
    c, h, w = shape
    if resize > 0:
        r, cl = img.shape[:2]
        nh, nw = (resize * r // cl, resize) if r > cl else (resize, resize * cl // r)
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    r, cl = img.shape[:2]
    if r < h:
        img = cv2.resize(img, (int(np.float32(h) / np.float32(r) * np.float32(cl)), h))
        r, cl = img.shape[:2]
    if cl < w:
        img = cv2.resize(img, (w, int(np.float32(w) / np.float32(cl) * np.float32(r))))
        r, cl = img.shape[:2]
    y, x = (r - h) // 2, (cl - w) // 2
    out = img[y:y + h, x:x + w][:, :, ::-1].transpose(2, 0, 1).astype(np.float32)
    if mirror:
        out = out[:, :, ::-1]
    mult = (np.float32(scale) / np.float32(std)).astype(np.float32).reshape(3, 1, 1)
    return (out - np.float32(mean).reshape(3, 1, 1)) * mult


@pytest.mark.parametrize("threads", [1, 3])
def test_image_record_iter_matches_reference(tmp_path, threads):
    imgs = _images(11)
    rec, _ = _write_rec(tmp_path, imgs)
    mean, std = (123.68, 116.28, 103.53), (58.395, 57.12, 57.375)
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 24, 24), batch_size=4,
                               resize=30, mean_r=mean[0], mean_g=mean[1], mean_b=mean[2],
                               std_r=std[0], std_g=std[1], std_b=std[2], scale=0.5,
                               mirror=True, preprocess_threads=threads, prefetch_buffer=2)
    assert it.provide_data[0].shape == (4, 3, 24, 24)
    assert it.provide_label[0].shape == (4,)
    for ep in _round_batch_reference(11, 4, 2):
        batches = list(it)
        assert len(batches) == len(ep)
        for b, (ids, pad) in zip(batches, ep):
            want = np.stack([_ref_image(imgs[i], (3, 24, 24), 30, mean, std, 0.5, True)
                             for i in ids])
            np.testing.assert_array_equal(b.data[0].asnumpy(), want)
            np.testing.assert_array_equal(b.label[0].asnumpy(), [i % 5 for i in ids])
            np.testing.assert_array_equal(b.index, ids)  # the records' image ids
            assert b.pad == pad
        it.reset()
    it.close()


def test_image_record_iter_uint8_labels_parts(tmp_path):
    imgs = _images(9, seed=2)
    labels = [[i, 2 * i, 0.5] for i in range(9)]
    rec, idx = _write_rec(tmp_path, imgs, labels)
    it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 28, 28),
                               batch_size=3, label_width=3, dtype="uint8", num_parts=3,
                               part_index=1)
    b = it.next()
    assert b.data[0].dtype == np.uint8 and b.label[0].shape == (3, 3)
    want = np.stack([_ref_image(imgs[i], (3, 28, 28)) for i in (3, 4, 5)]).astype(np.uint8)
    np.testing.assert_array_equal(b.data[0].asnumpy(), want)
    np.testing.assert_array_equal(b.label[0].asnumpy(), np.float32(labels[3:6]))
    with pytest.raises(StopIteration):
        it.next()
    it.close()


def test_image_record_iter_errors(tmp_path):
    rec, _ = _write_rec(tmp_path, _images(4), idx=False)
    with pytest.raises(mx.base.MXNetError, match="data_shape"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(5, 28, 28), batch_size=2)
    with pytest.raises(mx.base.MXNetError, match="label_width"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 28, 28), batch_size=2,
                              label_width=2)
    data = open(rec, "rb").read()
    bad = str(tmp_path / "trunc.rec")
    with open(bad, "wb") as f:
        f.write(data[:-10])
    with pytest.raises(mx.base.MXNetError, match=r"trunc.rec.*truncated record at offset"):
        mx.io.ImageRecordIter(path_imgrec=bad, data_shape=(3, 28, 28), batch_size=2)
    junk = str(tmp_path / "junk.rec")
    with open(junk, "wb") as f:
        f.write(_ref_record(mx.recordio.pack(mx.recordio.IRHeader(0, 0, 0, 0), b"notanimage")))
    with pytest.raises(mx.base.MXNetError, match=r"junk.rec.*cannot decode.*record 0"):
        mx.io.ImageRecordIter(path_imgrec=junk, data_shape=(3, 28, 28), batch_size=1)


def test_imdecode_and_geometry():
    img = _images(1)[0]
    ok, buf = cv2.imencode(".png", img)
    a = mx.image.imdecode(buf.tobytes())
    assert a.dtype == np.uint8 and a.shape == img.shape
    np.testing.assert_array_equal(a.asnumpy(), img[:, :, ::-1])
    np.testing.assert_array_equal(mx.image.imdecode(bytearray(buf.tobytes()), to_rgb=False)
                                  .asnumpy(), img)
    g = mx.image.imdecode(buf.tobytes(), flag=0)
    np.testing.assert_array_equal(g.asnumpy()[:, :, 0], cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE))
    with pytest.raises(mx.base.MXNetError):
        mx.image.imdecode(b"")
    with pytest.raises(mx.base.MXNetError):
        mx.image.imdecode(b"clearly not an image")
    with pytest.raises(mx.base.MXNetError, match="nope.jpg"):
        mx.image.imread("/nonexistent/nope.jpg")
    with pytest.raises(mx.base.MXNetError, match="interp method -1"):
        mx.image.imresize(a, 17, 11, interp=-1)
    r = mx.image.imresize(a, 17, 11, interp=1)
    np.testing.assert_array_equal(r.asnumpy(), cv2.resize(img[:, :, ::-1], (17, 11)))
    s = mx.image.resize_short(a, 20, interp=1)  # 40x50 -> 20x25
    np.testing.assert_array_equal(s.asnumpy(), cv2.resize(img[:, :, ::-1], (25, 20)))
    c, box = mx.image.center_crop(a, (30, 20))
    assert box == (10, 10, 30, 20)
    np.testing.assert_array_equal(c.asnumpy(), img[10:30, 10:40, ::-1])
    f = mx.image.fixed_crop(a, 3, 4, 10, 12)
    np.testing.assert_array_equal(f.asnumpy(), img[4:16, 3:13, ::-1])
    rc, (x0, y0, w, h) = mx.image.random_crop(a, (16, 16))
    np.testing.assert_array_equal(rc.asnumpy(), img[y0:y0 + 16, x0:x0 + 16, ::-1])
    assert mx.image.scale_down((640, 480), (720, 120)) == (640, 106)
    assert mx.image.scale_down((360, 1000), (480, 500)) == (360, 375)
    x = np.random.rand(5, 6, 3).astype(np.float32) * 255
    mean, std = np.float32([1, 2, 3]), np.float32([2, 3, 4])
    np.testing.assert_allclose(mx.image.color_normalize(mx.nd.array(x), mx.nd.array(mean),
                                                        mx.nd.array(std)).asnumpy(),
                               (x - mean) / std, rtol=1e-6)


def test_augmenters():
    img = mx.nd.array(_images(1)[0], dtype="uint8")
    flip = mx.image.HorizontalFlipAug(1.0)
    np.testing.assert_array_equal(flip(img).asnumpy(), img.asnumpy()[:, ::-1])
    cast = mx.image.CastAug()
    assert cast(img).dtype == np.float32
    augs = mx.image.CreateAugmenter((3, 24, 24), resize=30, mean=True, std=True)
    out = img
    for aug in augs:
        out = aug(out)
    ref = cv2.resize(img.asnumpy(), (37, 30), interpolation=cv2.INTER_CUBIC)  # 40x50 -> 30x37
    ref = ref[3:27, 6:30].astype(np.float32)
    ref = (ref - np.float32([123.68, 116.28, 103.53])) / np.float32([58.395, 57.12, 57.375])
    np.testing.assert_allclose(out.asnumpy(), ref, rtol=1e-5, atol=1e-5)
    bright = mx.image.BrightnessJitterAug(0.3)(cast(img)).asnumpy()
    ratio = bright / np.maximum(img.asnumpy().astype(np.float32), 1)
    assert 0.7 - 1e-5 <= ratio[img.asnumpy() > 0].min() <= ratio.max() <= 1.3 + 1e-5
    assert isinstance(augs[0].dumps(), str)


def test_image_iter(tmp_path):
    imgs = _images(7, seed=5)
    rec, idx = _write_rec(tmp_path, imgs)
    for handle, counts, pads in (("pad", 3, [0, 0, 2]), ("discard", 2, [0, 0]),
                                 ("roll_over", 2, [0, 0])):
        it = mx.image.ImageIter(3, (3, 20, 20), path_imgrec=rec, path_imgidx=idx,
                                last_batch_handle=handle)
        got = list(it)
        assert len(got) == counts and [b.pad for b in got] == pads
        want0 = np.stack([_center(imgs[i], 20) for i in range(3)])
        np.testing.assert_array_equal(got[0].data[0].asnumpy(), want0)
        np.testing.assert_array_equal(got[0].label[0].asnumpy(), [0, 1, 2])
    it.reset()
    b = it.next()  # roll_over: the 7th image starts the next epoch (pad counts the new ones)
    assert b.pad == 2
    np.testing.assert_array_equal(b.label[0].asnumpy(), [6 % 5, 0, 1])
    lst = tmp_path / "im.lst"
    paths = []
    for i, img in enumerate(imgs[:4]):
        p = str(tmp_path / ("%d.png" % i))
        cv2.imwrite(p, img)
        paths.append(p)
    lst.write_text("".join("%d\t%d\t%s\n" % (i, 10 + i, p) for i, p in enumerate(paths)))
    it = mx.image.ImageIter(2, (3, 20, 20), path_imglist=str(lst), path_root="")
    got = list(it)
    np.testing.assert_array_equal(np.concatenate([g.label[0].asnumpy() for g in got]),
                                  [10, 11, 12, 13])
    np.testing.assert_array_equal(got[1].data[0].asnumpy()[1], _center(imgs[3], 20))


def _center(img, size):
    """CreateAugmenter's default for a (3, size, size) shape on an image at least that
    big: the centred size x size box, RGB, CHW float32."""
    h, w = img.shape[:2]
    y, x = int((h - size) / 2), int((w - size) / 2)
    return img[y:y + size, x:x + size, ::-1].transpose(2, 0, 1).astype(np.float32)


def test_missing_opencv_message():
    code = ("import sys; sys.modules['cv2'] = None\n"
            "import loom as mx, numpy as np\n"
            "it = mx.io.NDArrayIter(np.ones((4, 2)), batch_size=2); assert len(list(it)) == 2\n"
            "try:\n    mx.image.imdecode(b'x')\nexcept ImportError as e:\n"
            "    assert 'opencv-python-headless' in str(e), e\nelse:\n    raise SystemExit(1)\n"
            "try:\n    mx.io.ImageRecordIter(path_imgrec='x.rec', data_shape=(3, 4, 4))\n"
            "except ImportError as e:\n    assert 'opencv-python-headless' in str(e), e\n"
            "else:\n    raise SystemExit(2)\nprint('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_image_det_iter(tmp_path):
    imgs = _images(3, seed=7)
    objs = [[[1, 0.1, 0.2, 0.5, 0.6]], [[2, 0.0, 0.0, 1.0, 1.0], [3, 0.2, 0.3, 0.4, 0.9]],
            [[0, 0.5, 0.5, 0.7, 0.8], [1, 0.6, 0.1, 0.2, 0.3]]]  # last box is invalid
    imglist = []
    for i, (img, o) in enumerate(zip(imgs, objs)):
        p = str(tmp_path / ("%d.png" % i))
        cv2.imwrite(p, img)
        imglist.append([2, 5] + [v for box in o for v in box] + [p])
    it = mx.image.ImageDetIter(3, (3, 16, 16), imglist=imglist, path_root="")
    assert it.label_shape == (2, 5)
    b = it.next()
    lab = b.label[0].asnumpy()
    want = np.full((3, 2, 5), -1, np.float32)
    want[0, 0] = objs[0][0]
    want[1] = objs[1]
    want[2, 0] = objs[2][0]
    np.testing.assert_allclose(lab, want, rtol=1e-6)
    ref = cv2.resize(imgs[1], (16, 16), interpolation=cv2.INTER_CUBIC)[:, :, ::-1]
    np.testing.assert_array_equal(b.data[0].asnumpy()[1], ref.transpose(2, 0, 1))
    flip = mx.image.DetHorizontalFlipAug(1.0)
    src = mx.nd.array(imgs[0], dtype="uint8")
    out, lab = flip(src, np.array(objs[1], np.float32))
    np.testing.assert_array_equal(out.asnumpy(), imgs[0][:, ::-1])
    np.testing.assert_allclose(lab[:, 1:5], [[0, 0, 1, 1], [0.6, 0.3, 0.8, 0.9]], rtol=1e-6)


def test_abandoned_iterators_stop_their_threads(tmp_path):
    import gc
    import threading
    import time
    rec, _ = _write_rec(tmp_path, _images(6), idx=False)
    gc.collect()  # iterators of earlier tests
    time.sleep(0.2)
    before = threading.active_count()
    for _ in range(3):
        it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 28, 28), batch_size=2,
                                   prefetch_buffer=1, preprocess_threads=2)
        it.next()
        p = mx.io.PrefetchingIter(mx.io.NDArrayIter(np.ones((10, 2)), batch_size=2))
        p.next()
        del it, p
    gc.collect()
    deadline = time.time() + 5
    while threading.active_count() > before and time.time() < deadline:
        time.sleep(0.05)
        gc.collect()  # a producer may have held its iterator during the first collection
    assert threading.active_count() <= before, [t.name for t in threading.enumerate()]


def test_image_record_iter_random_augmentation(tmp_path):
    imgs = _images(6, seed=4)
    rec, _ = _write_rec(tmp_path, imgs, idx=False)

    def run(**kw):
        it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 20, 20), batch_size=3, **kw)
        out = np.concatenate([b.data[0].asnumpy() for b in it])
        it.close()
        return out

    # rand_crop / rand_mirror: every output is some 20x20 window of its image, maybe mirrored
    out = run(rand_crop=True, rand_mirror=True, seed_aug=5)
    for img, o in zip(imgs, out):
        rgb = img[:, :, ::-1].transpose(2, 0, 1).astype(np.float32)
        h, w = rgb.shape[1:]
        found = any(np.array_equal(o, win) or np.array_equal(o, win[:, :, ::-1])
                    for y in range(h - 19) for x in range(w - 19)
                    for win in [rgb[:, y:y + 20, x:x + 20]])
        assert found
    many = dict(rand_crop=True, rand_mirror=True, max_random_scale=1.3, min_random_scale=0.9,
                max_rotate_angle=10, max_shear_ratio=0.2, max_aspect_ratio=0.2, pad=2,
                random_h=10, random_s=20, random_l=30, brightness=0.2, contrast=0.2,
                saturation=0.2, pca_noise=0.1, max_random_illumination=3,
                max_random_contrast=0.2)
    a, b, c = run(seed_aug=3, **many), run(seed_aug=3, **many), run(seed_aug=4, **many)
    assert np.array_equal(a, b) and not np.array_equal(a, c) and np.isfinite(a).all()
    rrc = run(random_resized_crop=True, min_random_area=0.3, max_aspect_ratio=0.3, seed_aug=1)
    assert rrc.shape == (6, 3, 20, 20) and not np.array_equal(rrc, run())
