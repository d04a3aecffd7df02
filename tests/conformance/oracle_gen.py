"""The MXNet 1.9.1 side of the conformance suite. Runs under the ORACLE interpreter
(LOOM_ORACLE_PYTHON, made by scripts/setup_oracle.sh), never under Loom's .venv:

    $LOOM_ORACLE_PYTHON oracle_gen.py OUT GROUP [GROUP ...]    generate reference cases
    $LOOM_ORACLE_PYTHON oracle_gen.py --run-json DIR            run Loom-written files

Groups: ops, updates, seed, models, zoo. Each case is a directory OUT/GROUP/ID holding
symbol.json (written by MXNet), params.params (arg:/aux: prefixed, MXNet's nd.save),
meta.json, inputs arg_*.npy / aux_*.npy / headgrad_*.npy and expected results:
  out_<i>.npy        inference forward outputs
  train_out_<i>.npy  training forward outputs, then backward with grad_req write:
  grad_<name>.npy    gradients,  aux_train_<name>.npy aux states afterwards
  gradadd_init_<name>.npy / gradadd_<name>.npy: grad_req add, initial gradient arrays and
                     their content after two training forward+backward passes
  aux_add_<name>.npy aux states after those two passes
"""
import json
import os
import sys
import time
import traceback

import numpy as np
import mxnet as mx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases as C  # noqa: E402
import centerloss_op  # noqa: E402,F401  (registers conf_centerloss with mxnet)

CTX = mx.cpu()


def random_array(rng, shape, spec, dtype="float32"):
    kind = spec[0] if spec else "normal"
    if kind == "normal":
        a = rng.randn(*shape) * (spec[1] if spec and len(spec) > 1 else 1.0)
    elif kind == "uniform":
        a = rng.uniform(spec[1], spec[2], size=shape)
    elif kind == "int":
        a = rng.randint(spec[1], spec[2], size=shape)
    elif kind == "absmin":  # |x| >= spec[1], random sign
        a = (spec[1] + rng.rand(*shape) * 1.5) * np.where(rng.rand(*shape) < 0.5, -1, 1)
    elif kind == "zeros":
        a = np.zeros(shape)
    else:
        raise ValueError(spec)
    return np.asarray(a).astype(dtype)


def default_aux_spec(name):
    if name.endswith("var"):
        return ("uniform", 0.5, 2.0)
    return ("normal", 0.5)


def save_npy(d, name, a):
    np.save(os.path.join(d, name + ".npy"), a)


def to_nd(a):
    return mx.nd.array(a, ctx=CTX, dtype=a.dtype)


def run_symbol_case(d, sym, shapes, meta, init=None, dtypes=None, seed=0, params=None):
    """Binds `sym`, generates inputs (or takes `params`), runs every pass and writes files."""
    init, dtypes = init or {}, dtypes or {}
    rng = np.random.RandomState(seed)
    arg_names, aux_names = sym.list_arguments(), sym.list_auxiliary_states()
    type_dict = {k: np.dtype(v) for k, v in dtypes.items()}
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape(**shapes)
    types = {k: np.dtype("float32") for k in shapes}
    types.update(type_dict)
    _, out_types, _ = sym.infer_type(**types)
    args, aux = {}, {}
    for n, s in zip(arg_names, arg_shapes):
        if params is not None and n in params:
            args[n] = params[n]
        else:
            args[n] = random_array(rng, s, init.get(n), dtypes.get(n, "float32"))
    for n, s in zip(aux_names, aux_shapes):
        if params is not None and n in params:
            aux[n] = params[n]
        else:
            aux[n] = random_array(rng, s, init.get(n, default_aux_spec(n)))
    os.makedirs(d, exist_ok=True)
    sym.save(os.path.join(d, "symbol.json"))
    mx.nd.save(os.path.join(d, "params.params"),
               dict([("arg:" + k, to_nd(v)) for k, v in args.items()] +
                    [("aux:" + k, to_nd(v)) for k, v in aux.items()]))
    for k, v in args.items():
        save_npy(d, "arg_" + k, v)
    for k, v in aux.items():
        save_npy(d, "aux_" + k, v)
    no_grad = set(meta.get("no_grad", []))
    grad_names = [n for n in arg_names if n not in no_grad]

    def bind(req, grads=None):
        ag = {n: (to_nd(grads[n]) if grads else mx.nd.zeros(args[n].shape, dtype=args[n].dtype))
              for n in grad_names}
        return sym.bind(CTX, {k: to_nd(v) for k, v in args.items()}, args_grad=ag,
                        grad_req={n: (req if n in ag else "null") for n in arg_names},
                        aux_states={k: to_nd(v) for k, v in aux.items()})

    exe = bind("write")
    outs = exe.forward(is_train=False)
    for i, o in enumerate(outs):
        save_npy(d, "out_%d" % i, o.asnumpy())
    meta["outputs"] = sym.list_outputs()
    meta["arg_names"], meta["aux_names"], meta["grad_names"] = arg_names, aux_names, grad_names
    if meta.get("train", True):
        head = None
        if meta.get("head_grad", True):
            head = [random_array(rng, s, None, np.dtype(t).name)
                    for s, t in zip(out_shapes, out_types)]
            for i, h in enumerate(head):
                save_npy(d, "headgrad_%d" % i, h)
        outs = exe.forward(is_train=True)
        for i, o in enumerate(outs):
            save_npy(d, "train_out_%d" % i, o.asnumpy())
        exe.backward([to_nd(h) for h in head] if head else None)
        for n in grad_names:
            save_npy(d, "grad_" + n, exe.grad_dict[n].asnumpy())
        for n in aux_names:
            save_npy(d, "aux_train_" + n, exe.aux_dict[n].asnumpy())
        if meta.get("add", True) and grad_names:
            g0 = {n: random_array(rng, args[n].shape, None, args[n].dtype.name)
                  for n in grad_names}
            exe = bind("add", g0)
            for _ in range(2):
                exe.forward(is_train=True)
                exe.backward([to_nd(h) for h in head] if head else None)
            for n in grad_names:
                save_npy(d, "gradadd_init_" + n, g0[n])
                save_npy(d, "gradadd_" + n, exe.grad_dict[n].asnumpy())
            for n in aux_names:
                save_npy(d, "aux_add_" + n, exe.aux_dict[n].asnumpy())
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def gen_ops(out):
    status = {}
    # LOOM_CONFORMANCE_K=substring: generate only the cases whose id contains it (for a
    # quick `pytest -k substring` while developing an op; a full run ignores it).
    only = os.environ.get("LOOM_CONFORMANCE_K")
    for c in C.CASES:
        if only and only not in c.cid:
            continue
        try:
            with mx.name.NameManager():
                sym = c.build(mx)
            run_symbol_case(os.path.join(out, c.cid), sym, c.shapes, c.meta(), c.init,
                            c.dtypes, c.seed)
            status[c.cid] = {"ok": True}
        except Exception:
            status[c.cid] = {"ok": False, "error": traceback.format_exc()[-1500:]}
    with open(os.path.join(out, "status.json"), "w") as f:
        json.dump(status, f, indent=1)


def gen_updates(out):
    for idx, (op, kw, states) in enumerate(C.UPDATES):
        d = os.path.join(out, "%s_%d" % (op, idx))
        os.makedirs(d, exist_ok=True)
        rng = np.random.RandomState(1000 + idx)
        shape = (5, 7)
        w = rng.randn(*shape).astype(np.float32)
        arrays = {"weight": w}
        for s in states:
            if s == "rescale_grad":
                arrays[s] = np.array([0.5], dtype=np.float32)
            elif s in ("var", "n"):
                arrays[s] = rng.uniform(0.0, 0.5, size=shape).astype(np.float32)
            else:
                arrays[s] = (rng.randn(*shape) * 0.1).astype(np.float32)
        for k, v in arrays.items():
            save_npy(d, "init_" + k, v)
        nds = {k: to_nd(v) for k, v in arrays.items()}
        for step in range(C.UPDATE_STEPS):
            g = (rng.randn(*shape) * 0.8).astype(np.float32)
            save_npy(d, "grad_%d" % step, g)
            ins = [nds["weight"], to_nd(g)] + [nds[s] for s in states]
            fn = getattr(mx.nd, op, None) or getattr(mx.nd._internal, op)
            # Not out=weight: MXNet's nag_mom_update kernel writes out before it reads weight
            # for mom, so aliasing out and weight feeds mom the new weight when wd != 0.
            # Loom follows the formula with the old weight, in place or not.
            new_w = mx.nd.zeros(shape)
            fn(*ins, out=new_w, **kw)
            nds["weight"][:] = new_w
            for k, v in nds.items():
                save_npy(d, "step%d_%s" % (step, k), v.asnumpy())
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump({"op": op, "kwargs": kw, "states": states, "steps": C.UPDATE_STEPS}, f)
    gen_lamb(out)


def gen_lamb(out):
    for idx, (kw1, kw2) in enumerate(C.LAMB_CASES):
        d = os.path.join(out, "lamb_%d" % idx)
        os.makedirs(d, exist_ok=True)
        rng = np.random.RandomState(2000 + idx)
        shape = (6, 5)
        init = {"weight": rng.randn(*shape).astype(np.float32),
                "mean": (rng.randn(*shape) * 0.1).astype(np.float32),
                "var": rng.uniform(0.0, 0.5, size=shape).astype(np.float32)}
        for k, v in init.items():
            save_npy(d, "init_" + k, v)
        w, mean, var = (to_nd(init[k]) for k in ("weight", "mean", "var"))
        for step in range(C.UPDATE_STEPS):
            g = (rng.randn(*shape) * 0.8).astype(np.float32)
            save_npy(d, "grad_%d" % step, g)
            upd = mx.nd.lamb_update_phase1(w, to_nd(g), mean, var, t=step + 1, **kw1)
            r1, r2 = w.norm(), upd.norm()
            w = mx.nd.lamb_update_phase2(w, upd, r1, r2, **kw2)
            for k, v in (("weight", w), ("mean", mean), ("var", var), ("g", upd)):
                save_npy(d, "step%d_%s" % (step, k), v.asnumpy())


def gen_seed(out):
    with mx.name.NameManager():
        sym = centerloss_op.build(mx)
    n, d_in = 8, 10
    init = {"softmax_label": ("int", 0, centerloss_op.NUM_CLASS),
            "center_loss_center": ("normal", 0.5), "center_loss_diff": ("zeros",),
            "center_loss_sum": ("zeros",)}
    meta = {"cid": "seed_centerloss", "no_grad": ["softmax_label"], "head_grad": False,
            "train": True, "add": True, "add_ref": "mxnet", "tol": list(C.DEFAULT_TOL),
            "note": "Group(SoftmaxOutput, MakeLoss(Custom conf_centerloss))"}
    run_symbol_case(os.path.join(out, "seed_centerloss"), sym,
                    {"data": (n, d_in), "softmax_label": (n,)}, meta, init, seed=42)


def model_params(sym, shapes, rng):
    """Seeded weights scaled by 1/sqrt(fan_in) so deep nets stay in range; BN statistics
    positive; data U(-1, 1); labels 0."""
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    p = {}
    for n, s in zip(sym.list_arguments(), arg_shapes):
        if n in shapes:
            p[n] = (np.zeros(s) if "label" in n else rng.uniform(-1, 1, size=s)).astype(np.float32)
        elif n.endswith("gamma"):
            p[n] = rng.uniform(0.5, 1.5, size=s).astype(np.float32)
        elif n.endswith("beta") or n.endswith("bias"):
            p[n] = rng.uniform(-0.1, 0.1, size=s).astype(np.float32)
        else:
            fan_in = int(np.prod(s[1:])) if len(s) > 1 else 1
            p[n] = (rng.uniform(-1, 1, size=s) * np.sqrt(3.0 / max(fan_in, 1))).astype(np.float32)
    for n, s in zip(sym.list_auxiliary_states(), aux_shapes):
        p[n] = (rng.uniform(0.5, 1.5, size=s) if n.endswith("var")
                else rng.uniform(-0.1, 0.1, size=s)).astype(np.float32)
    return p


def shared_models_dir():
    d = os.environ.get("LOOM_SHARED_DIR")
    if d:
        return os.path.join(d, "models")
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "..",
                        "shared", "models")


def gen_models(out):
    mdir = shared_models_dir()
    status = {}
    for fn in sorted(os.listdir(mdir)):
        if not fn.endswith(".json"):
            continue
        key = fn[:2]
        d = os.path.join(out, key)
        t0 = time.time()
        try:
            sym = mx.sym.load(os.path.join(mdir, fn))
            shapes = C.MODEL_INPUTS[key]
            p = model_params(sym, shapes, np.random.RandomState(int(key)))
            meta = {"cid": "model" + key, "file": fn, "train": False, "shapes":
                    {k: list(v) for k, v in shapes.items()}, "tol": list(C.DEFAULT_TOL)}
            run_symbol_case(d, sym, shapes, meta, params=p)
            status[key] = {"ok": True, "file": fn, "seconds": round(time.time() - t0, 2)}
        except Exception as e:  # MXNet cannot load or run it: recorded, Loom test says why
            status[key] = {"ok": False, "file": fn,
                           "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:400])}
    with open(os.path.join(out, "status.json"), "w") as f:
        json.dump(status, f, indent=1)


def gen_zoo(out, only=None):
    from mxnet.gluon.model_zoo import vision
    status = {}
    for name, size, batches in C.ZOO:
        if only and name not in only:
            continue
        t0 = time.time()
        d = os.path.join(out, name)
        try:
            mx.random.seed(7)
            net = vision.get_model(name, pretrained=False)
            net.initialize(mx.init.Xavier(magnitude=2.0), ctx=CTX)
            rng = np.random.RandomState(abs(hash(name)) % 1000)
            x = {b: rng.uniform(-1, 1, size=(b, 3, size, size)).astype(np.float32)
                 for b in batches}
            net(to_nd(x[batches[0]]))  # materialise deferred shapes
            # Non-trivial BatchNorm statistics so inference BN is not the identity.
            for pname, prm in net.collect_params().items():
                if pname.endswith("running_var"):
                    prm.set_data(mx.nd.array(rng.uniform(0.5, 1.5, size=prm.shape)))
                elif pname.endswith("running_mean"):
                    prm.set_data(mx.nd.array(rng.uniform(-0.1, 0.1, size=prm.shape)))
                elif pname.endswith("gamma"):
                    prm.set_data(mx.nd.array(rng.uniform(0.5, 1.5, size=prm.shape)))
                elif pname.endswith("beta"):
                    prm.set_data(mx.nd.array(rng.uniform(-0.1, 0.1, size=prm.shape)))
            net.hybridize(static_alloc=False)
            os.makedirs(d, exist_ok=True)
            for b in batches:
                y = net(to_nd(x[b])).asnumpy()
                save_npy(d, "data_b%d" % b, x[b])
                save_npy(d, "out_b%d" % b, y)
            net.export(os.path.join(d, "model"), epoch=0)
            with open(os.path.join(d, "meta.json"), "w") as f:
                json.dump({"name": name, "size": size, "batches": list(batches)}, f)
            status[name] = {"ok": True, "seconds": round(time.time() - t0, 2)}
        except Exception as e:
            status[name] = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    with open(os.path.join(out, "status.json"), "w") as f:
        json.dump(status, f, indent=1)


def run_json(d):
    """Loads Loom-written loom-symbol.json + loom.params in MXNet and runs an inference
    forward, writing mx_out_<i>.npy; used for the Loom -> MXNet direction."""
    sym = mx.sym.load(os.path.join(d, "loom-symbol.json"))
    loaded = mx.nd.load(os.path.join(d, "loom.params"))
    args = {k[4:]: v for k, v in loaded.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in loaded.items() if k.startswith("aux:")}
    # Every loaded array, to check the .params reading bit for bit.
    for k, v in loaded.items():
        save_npy(d, "mx_loaded_" + k.replace(":", "_"), v.asnumpy())
    missing = [n for n in sym.list_arguments() if n not in args]
    if missing:
        raise RuntimeError("arguments missing from loom.params: %s" % missing)
    exe = sym.bind(CTX, args, grad_req="null", aux_states=aux)
    for i, o in enumerate(exe.forward(is_train=False)):
        save_npy(d, "mx_out_%d" % i, o.asnumpy())
    with open(os.path.join(d, "mx_info.json"), "w") as f:
        json.dump({"arguments": sym.list_arguments(), "aux": sym.list_auxiliary_states(),
                   "outputs": sym.list_outputs()}, f)


def main(argv):
    if argv and argv[0] == "--run-json":
        errors = {}
        for d in argv[1:]:
            try:
                run_json(d)
            except Exception:
                errors[d] = traceback.format_exc()
        if errors:
            for d, e in errors.items():
                sys.stderr.write("%s:\n%s\n" % (d, e))
        print(json.dumps({"errors": errors}))
        return 0
    out, groups = argv[0], argv[1:]
    gens = {"ops": gen_ops, "updates": gen_updates, "seed": gen_seed, "models": gen_models,
            "zoo": gen_zoo}
    for g in groups:
        t0 = time.time()
        gd = os.path.join(out, g)
        os.makedirs(gd, exist_ok=True)
        gens[g](gd)
        with open(os.path.join(gd, "DONE"), "w") as f:
            f.write("%.2f\n" % (time.time() - t0))
        sys.stderr.write("oracle_gen: %s done in %.1fs\n" % (g, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
