"""Writes the hand-made seed files of the fuzz corpora (tests/fuzz/corpus/<harness>/seed_*).

Run from the repository root with the built package and NumPy:
    PYTHONPATH=build/python .venv/bin/python tests/fuzz/make_seeds.py
The model files of fuzz_json (model_*.json) are verbatim copies of ../shared/models/*.json;
finding_* files are the inputs of past findings; the other files are what `scripts/fuzz.sh
merge` (libFuzzer -merge=1) kept from campaigns.
"""
import io
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def out(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- .npy --------------------------------------------------------------------------------
def npy(arr, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, arr, version=version, allow_pickle=False)
    return b.getvalue()


for dt in ["<f4", "<f8", "<f2", "<i4", "<i8", "|u1", "|i1", "|b1", ">f4", "<u2", "<c8"]:
    out("fuzz_npy", "dtype_" + dt.strip("<>|") + ("_be" if dt[0] == ">" else "") + ".npy",
        npy(np.arange(6).astype(dt).reshape(2, 3)))
out("fuzz_npy", "scalar.npy", npy(np.array(3.5, dtype="<f4")))
out("fuzz_npy", "empty.npy", npy(np.zeros((0, 3), dtype="<f4")))
out("fuzz_npy", "v2.npy", npy(np.ones((2, 2), dtype="<f4"), version=(2, 0)))
out("fuzz_npy", "v3.npy", npy(np.ones((3,), dtype="<i8"), version=(3, 0)))
out("fuzz_npy", "fortran.npy", npy(np.asfortranarray(np.ones((2, 3), dtype="<f4"))))
out("fuzz_npy", "structured.npy", npy(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")])))
out("fuzz_npy", "4d.npy", npy(np.zeros((1, 3, 2, 2), dtype="<f4")))
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }"
out("fuzz_npy", "py2_long.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + bytes(24))

# ---- .params -----------------------------------------------------------------------------
import loom  # noqa: E402  (the built package)

nd = loom.nd
out("fuzz_params", "checkpoint.params", nd.save_tobuffer({
    "arg:fc_weight": nd.array(np.arange(6, dtype="float32").reshape(2, 3)),
    "arg:fc_bias": nd.array(np.zeros(2, dtype="float32")),
    "aux:bn_moving_var": nd.array(np.ones(2, dtype="float32"))}))
out("fuzz_params", "list.params", nd.save_tobuffer([nd.array(np.ones((2, 2), dtype="float64")),
                                                    nd.array(np.arange(3, dtype="int32"))]))
out("fuzz_params", "gluon.params", nd.save_tobuffer({
    "dense0.weight": nd.array(np.ones((2, 2), dtype="float16")),
    "dense0.bias": nd.array(np.ones((2,), dtype="int64"))}))
out("fuzz_params", "scalar_v3.params", nd.save_tobuffer({"arg:s": nd.array(np.array(2.0, dtype="float32")),
                                                       "arg:u8": nd.array(np.arange(4, dtype="uint8"))}))
out("fuzz_params", "empty_list.params", nd.save_tobuffer([]))


def header(n):
    return struct.pack("<QQQ", 0x112, 0, n)


def names(*ns):
    return struct.pack("<Q", len(ns)) + b"".join(struct.pack("<Q", len(n)) + n.encode() for n in ns)


V1, V2, V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
v1 = struct.pack("<Ii2qiii", V1, 2, 1, 2, 1, 0, 0) + struct.pack("<2f", 7, 8)
v0 = struct.pack("<I2Iiii", 2, 1, 2, 1, 0, 0) + struct.pack("<2f", 1, 2)
out("fuzz_params", "legacy_v1_v0.params", header(2) + v1 + v0 + names("arg:a", "aux:b"))
none_records = struct.pack("<Iii", V2, 0, 0) + struct.pack("<Ii", V1, 0) + struct.pack("<I", 0)
out("fuzz_params", "none_records.params", header(3) + none_records + names())
# row_sparse (stype 1): storage shape, shape, ctx, flag, one aux (flag, shape), data, aux data
rsp = (struct.pack("<Iii", V2, 1, 2) + struct.pack("<2q", 1, 2) + struct.pack("<i2q", 2, 3, 2) +
       struct.pack("<iii", 1, 0, 0) + struct.pack("<ii1q", 6, 1, 1) + struct.pack("<2f", 1, 2) +
       struct.pack("<q", 0))
out("fuzz_params", "row_sparse.params", header(1) + rsp + names("arg:w"))
csr = (struct.pack("<Iii", V2, 2, 1) + struct.pack("<q", 2) + struct.pack("<i2q", 2, 2, 2) +
       struct.pack("<iii", 1, 0, 0) + struct.pack("<ii1q", 6, 1, 3) + struct.pack("<ii1q", 6, 1, 2) +
       struct.pack("<2f", 1, 2) + struct.pack("<3q", 0, 1, 2) + struct.pack("<2q", 0, 1))
out("fuzz_params", "csr.params", header(1) + csr + names("arg:c"))
bf16 = struct.pack("<Iii", V2, 0, 1) + struct.pack("<q", 2) + struct.pack("<iii", 2, 1, 12) + bytes(4)
out("fuzz_params", "bfloat16_gpu.params", header(1) + bf16 + names("arg:h"))
v3_unknown = struct.pack("<Iii", V3, 0, 2) + struct.pack("<2q", -1, 3) + struct.pack("<iii", 1, 0, 0)
out("fuzz_params", "v3_unknown_dim.params", header(1) + v3_unknown + names("aux:x"))

# ---- CLI --shape values ------------------------------------------------------------------
for i, text in enumerate([
        "data=1,3,224,224", "data=1,3,32,32\nsoftmax_label=1", "data=2,3,8,8\nextra=2,5,8,8",
        "data=1,3,1,1", "data=1,4096", "data=1,3,99999999999,2", "conv_weight=4,3,3,3\ndata=1,3,5,5",
        "data=+1, 3,0x10,1", "=1,2", "data", "data=1,,2", "data=-1", "data=9223372036854775807,2,2,2"]):
    out("fuzz_cli_shape", "%02d.txt" % i, text)
