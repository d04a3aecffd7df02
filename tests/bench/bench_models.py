"""Makes the inference models of compare.py, once, under the MXNet 1.9.1 oracle (with onnx,
scripts/setup_bench.sh): each as MXNet symbol JSON + .params (random weights, the same for
every engine) and, by MXNet's own exporter, one ONNX file per batch size.

    ORACLE_PYTHON bench_models.py OUT_DIR KEY BATCH[,BATCH...]

Keys: r18, r50 (Gluon model zoo resnet18_v1 / resnet50_v1), mobilenet (mobilenet1.0), all at
224x224; mfn (the insightface-style MobileFaceNet of ../shared/models, 112x112). Writes
OUT_DIR/KEY-symbol.json, KEY-0000.params, KEY-bB.onnx and KEY.json ({"input", "chw"}), and
skips what exists. The .params keys carry MXNet's arg:/aux: prefixes.
"""
import json
import os
import sys

import mxnet as mx
import numpy as np

SHARED = os.environ.get("LOOM_SHARED_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                     "shared"))
ZOO = {"r18": "resnet18_v1", "r50": "resnet50_v1", "mobilenet": "mobilenet1.0"}
FILES = {"mfn": "12-hanson-young-mobilefacenet-ncnn-model-symbol.json"}


def gluon_export(key, prefix):
    mx.random.seed(0)
    net = mx.gluon.model_zoo.vision.get_model(ZOO[key], pretrained=False)
    net.initialize(mx.init.Xavier(magnitude=2))
    net.hybridize()
    net(mx.nd.zeros((1, 3, 224, 224)))
    net.export(prefix)  # prefix-symbol.json, prefix-0000.params
    return "data", (3, 224, 224)


def file_model(key, prefix):
    sym = mx.sym.load(os.path.join(SHARED, "models", FILES[key]))
    chw = (3, 112, 112)
    # MXNet's ONNX exporter turns FullyConnected on the 4-D (N, 512, 1, 1) map into a Gemm
    # without flattening it (ONNX Runtime and OpenVINO then reject the model): rebuild the
    # head as FullyConnected(Flatten(x)), the same computation with the same names.
    head = sym.get_internals()["conv_6dw7_7_batchnorm_output"]
    fc = mx.sym.FullyConnected(mx.sym.Flatten(head), weight=mx.sym.Variable("fc1_weight"),
                               bias=mx.sym.Variable("pre_fc1_bias"), num_hidden=128,
                               name="pre_fc1")
    sym = mx.sym.BatchNorm(fc, gamma=mx.sym.Variable("fc1_gamma"),
                           beta=mx.sym.Variable("fc1_beta"),
                           moving_mean=mx.sym.Variable("fc1_moving_mean"),
                           moving_var=mx.sym.Variable("fc1_moving_var"), eps=2e-5,
                           fix_gamma=True, momentum=0.9, name="fc1")
    # Random weights (variance 1/fan_in), BatchNorm scale 1 and statistics (0, 1), PReLU 0.25.
    arg_shapes, _, aux_shapes = sym.infer_shape(data=(1,) + chw)
    rng = np.random.RandomState(0)
    save = {}
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name == "data":
            continue
        if name.endswith("gamma"):
            v = np.ones(shape)
        elif name.endswith("alpha"):
            v = np.full(shape, 0.25)
        elif len(shape) < 2:
            v = np.zeros(shape)
        else:
            lim = np.sqrt(3.0 / (np.prod(shape) / shape[0]))
            v = rng.uniform(-lim, lim, shape)
        save["arg:" + name] = mx.nd.array(v.astype(np.float32))
    for name, shape in zip(sym.list_auxiliary_states(), aux_shapes):
        save["aux:" + name] = mx.nd.array(np.ones(shape) if name.endswith("var")
                                          else np.zeros(shape))
    sym.save(prefix + "-symbol.json")
    mx.nd.save(prefix + "-0000.params", save)
    return "data", chw


def main():
    out, key, batches = sys.argv[1], sys.argv[2], [int(b) for b in sys.argv[3].split(",")]
    os.makedirs(out, exist_ok=True)
    prefix = os.path.join(out, key)
    meta_path = prefix + ".json"
    if not os.path.exists(meta_path):
        name, chw = (gluon_export if key in ZOO else file_model)(key, prefix)
        with open(meta_path, "w") as f:
            json.dump({"input": name, "chw": list(chw)}, f)
    meta = json.load(open(meta_path))
    for b in batches:
        path = "%s-b%d.onnx" % (prefix, b)
        if os.path.exists(path):
            continue
        mx.onnx.export_model(prefix + "-symbol.json", prefix + "-0000.params",
                             in_shapes=[(b,) + tuple(meta["chw"])], in_types=[np.float32],
                             onnx_file_path=path + ".tmp", verbose=False)
        # MXNet's exporter lists the weights among the graph inputs, which keeps ONNX Runtime
        # from constant-folding them (no BatchNorm folding); ONNX Runtime's own advice is to
        # drop them from the inputs, as a user converting a model would.
        import onnx
        model = onnx.load(path + ".tmp")
        weights = {t.name for t in model.graph.initializer}
        keep = [i for i in model.graph.input if i.name not in weights]
        del model.graph.input[:]
        model.graph.input.extend(keep)
        # It also gives PRelu a (C,) slope, which ONNX broadcasting aligns with the width,
        # not the channels (ONNX Runtime refuses it): make it (C, 1, 1).
        slopes = {n.input[1] for n in model.graph.node if n.op_type == "PRelu"}
        for t in model.graph.initializer:
            if t.name in slopes and len(t.dims) == 1 and t.dims[0] > 1:
                t.dims.extend([1, 1])
        onnx.save(model, path + ".tmp")
        os.replace(path + ".tmp", path)
    print(json.dumps(meta))


main()
